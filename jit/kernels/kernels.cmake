# The kernel files of jit/kernels/ and the element types each is built for.
# Read by cmake/EmbedKernels.cmake, which embeds the sources for NVRTC and
# writes the host-emulation translation unit (one instance per type list).
#
#   GROVE_KERNEL_FILES           files (without .cuh) with GROVE_ENTRY points
#   GROVE_KERNEL_<file>_T0       types of GROVE_T0
#   GROVE_KERNEL_<file>_T1       types of GROVE_T1 (two-type files only);
#                                every (T0, T1) pair is an instance
#   GROVE_KERNEL_<file>_VARIANTS the kernel variants of the file's family
#                                (jit/kernel_config.h), spelled as in entry
#                                names ("lanes32_threads256"): the emulated
#                                library has each for every type list (every
#                                (T0, T1) pair of a two-type file), so the
#                                emulated device runs any variant the
#                                dispatcher picks. Equal to the family's space
#                                (KernelFamily::Enumerate; kernel_config_test
#                                checks).
set(GROVE_KERNEL_ALL_TYPES f32 f64 f16 bf16 i64 i32 i8 u8 bool)
set(GROVE_KERNEL_FLOAT_TYPES f32 f64 f16 bf16)

set(GROVE_KERNEL_FILES)

list(APPEND GROVE_KERNEL_FILES selftest)
set(GROVE_KERNEL_selftest_T0 f32 f16)

# Conditional graph nodes: a handle set from a device flag, a Loop's trip
# counter (type-free; u8 names the one instance).
list(APPEND GROVE_KERNEL_FILES graph_cond)
set(GROVE_KERNEL_graph_cond_T0 u8)

# Data movement by element width: u8, f16, i32, i64 stand for 1, 2, 4 and 8
# bytes of any dtype.
list(APPEND GROVE_KERNEL_FILES copy)
set(GROVE_KERNEL_copy_T0 u8 f16 i32 i64)
# The tiled transpose (family "transpose"): tiles of 16 or 32, 4 or 8
# thread rows.
set(GROVE_KERNEL_copy_VARIANTS rows4_tile16 rows8_tile16 rows4_tile32 rows8_tile32)
list(APPEND GROVE_KERNEL_FILES gather)
set(GROVE_KERNEL_gather_T0 u8 f16 i32 i64)
list(APPEND GROVE_KERNEL_FILES gather_onehot)
set(GROVE_KERNEL_gather_onehot_T0 f32 f64 f16 bf16 i64 i32 i8 u8)
set(GROVE_KERNEL_gather_onehot_T1 u8 f16 i32 i64)
# Value checks on the device (deferred checks), by element width.
list(APPEND GROVE_KERNEL_FILES check)
set(GROVE_KERNEL_check_T0 u8 f16 i32 i64)
list(APPEND GROVE_KERNEL_FILES fill)
set(GROVE_KERNEL_fill_T0 u8 f16 i32 i64)
list(APPEND GROVE_KERNEL_FILES fill_range)
set(GROVE_KERNEL_fill_range_T0 f32 f64 i32 i64)
list(APPEND GROVE_KERNEL_FILES conv)
set(GROVE_KERNEL_conv_T0 f32 f16 bf16)

list(APPEND GROVE_KERNEL_FILES pool)
set(GROVE_KERNEL_pool_T0 f32 f64 f16 bf16 i8 u8)

list(APPEND GROVE_KERNEL_FILES rnn)
set(GROVE_KERNEL_rnn_T0 f32)
# Row kernels: threads a block, and lanes per row (a thread, a warp, the block).
set(GROVE_ROW_VARIANTS)
foreach(t 64 128 256 512 1024)
  list(APPEND GROVE_ROW_VARIANTS lanes1_threads${t} lanes32_threads${t} lanes${t}_threads${t})
endforeach()
list(APPEND GROVE_KERNEL_FILES reduce softmax norm)
set(GROVE_KERNEL_reduce_VARIANTS ${GROVE_ROW_VARIANTS})
set(GROVE_KERNEL_softmax_VARIANTS ${GROVE_ROW_VARIANTS})
set(GROVE_KERNEL_norm_VARIANTS ${GROVE_ROW_VARIANTS})
set(GROVE_KERNEL_reduce_T0 f32 f64 f16 bf16 i64 i32 i8 u8)
set(GROVE_KERNEL_softmax_T0 f32 f64 f16 bf16)
set(GROVE_KERNEL_norm_T0 f32 f64 f16 bf16)
list(APPEND GROVE_KERNEL_FILES elementwise cast)
set(GROVE_KERNEL_elementwise_T0 ${GROVE_KERNEL_ALL_TYPES})
set(GROVE_KERNEL_cast_T0 ${GROVE_KERNEL_ALL_TYPES})
set(GROVE_KERNEL_cast_T1 ${GROVE_KERNEL_ALL_TYPES})
# cast: threads a block, vec elements converted per vector access.
set(GROVE_KERNEL_cast_VARIANTS)
foreach(t 64 128 256 512 1024)
  list(APPEND GROVE_KERNEL_cast_VARIANTS threads${t}_vec1 threads${t}_vec2 threads${t}_vec4)
endforeach()
# ew: threads a block, ipt items a thread per trip or vec elements per
# vector access (vec > 1 only with ipt 1).
set(GROVE_KERNEL_elementwise_VARIANTS)
foreach(t 64 128 256 512 1024)
  foreach(i 1 2 4 8)
    list(APPEND GROVE_KERNEL_elementwise_VARIANTS ipt${i}_threads${t}_vec1)
  endforeach()
  list(APPEND GROVE_KERNEL_elementwise_VARIANTS ipt1_threads${t}_vec2 ipt1_threads${t}_vec4)
endforeach()
# Small-M GEMM / GEMV (decode shapes).
list(APPEND GROVE_KERNEL_FILES gemv)
set(GROVE_KERNEL_gemv_T0 f32 f16 bf16)
set(GROVE_KERNEL_gemv_VARIANTS)
foreach(k 1 2 4 8 16 32)
  foreach(m 1 2 4 8)
    foreach(t 64 128 256)
      list(APPEND GROVE_KERNEL_gemv_VARIANTS ksplit${k}_mtile${m}_threads${t})
    endforeach()
  endforeach()
endforeach()
# The GEMM of bucketed plans whose N or K varies (every dim read at run time).
list(APPEND GROVE_KERNEL_FILES gemm_tiled)
set(GROVE_KERNEL_gemm_tiled_T0 f32 f16 bf16)
# gemm_tiled: a thread's rm x rn patch, K steps of tk, tiles tm x tn of C;
# threads = (tm / rm) * (tn / rn), 64 to 256.
set(GROVE_KERNEL_gemm_tiled_VARIANTS)
foreach(rm 2 4)
  foreach(rn 2 4)
    foreach(t 64 128 256)
      foreach(tk 8 16)
        foreach(tm 16 32 64)
          foreach(tn 16 32 64)
            math(EXPR threads "(${tm} / ${rm}) * (${tn} / ${rn})")
            if(threads EQUAL t)
              list(APPEND GROVE_KERNEL_gemm_tiled_VARIANTS rm${rm}_rn${rn}_threads${t}_tk${tk}_tm${tm}_tn${tn})
            endif()
          endforeach()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
endforeach()
list(APPEND GROVE_KERNEL_FILES attention)
set(GROVE_KERNEL_attention_T0 f32 f16 bf16)
# attention: the tiled kernel for head sizes up to hd (bq query rows and bk
# keys a tile, 128 threads); without parameters the warp-per-row kernel.
set(GROVE_KERNEL_attention_VARIANTS bk32_bq16_hd128_threads128 bk32_bq32_hd128_threads128
    bk64_bq16_hd64_threads128 bk64_bq32_hd64_threads128 bk64_bq64_hd64_threads128)
# attention_mma: the tiled kernel on tensor cores (mma.sync m16n8k16), 64
# query rows a block, bk keys a tile, heads up to hd; f16 and bf16.
list(APPEND GROVE_KERNEL_FILES attention_mma)
set(GROVE_KERNEL_attention_mma_T0 f16 bf16)
set(GROVE_KERNEL_attention_mma_VARIANTS bk64_bq64_hd64_threads128 bk64_bq64_hd128_threads128)
