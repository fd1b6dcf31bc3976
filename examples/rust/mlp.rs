//! Runs the demo MLP (x f32[batch,16] -> y f32[batch,4], softmax rows)
//! through grove's C ABI from Rust, the way an FFI user does: the functions
//! and structs of grove_c.h declared by hand, linked against libgrove.so.
//! It mirrors examples/mlp_c.c (same inputs, same printout) and also shows
//! the errors coming back as values.
//!
//!   rustc --edition 2018 -O -L build -l dylib=grove -C link-arg=-Wl,-rpath,$PWD/build \
//!       examples/rust/mlp.rs -o mlp_rust
//!   ./mlp_rust mlp.grove          (grove_make_models writes mlp.grove)
//!
//! or as a Cargo package (Cargo.toml, build.rs: links $GROVE_BUILD_DIR's libgrove.so):
//!
//!   GROVE_BUILD_DIR=$PWD/build cargo run --manifest-path examples/rust/Cargo.toml -- mlp.grove
//!
//! No crate beyond std: any rustc from 1.56 (Debian 12's 1.63 included).
//!
//! The structs are the versioned ones of grove_c.h, declared at the version
//! this program knows: grove_session_options_t version 1 and
//! grove_session_stats_t version 2. Each starts with struct_size, which this
//! program sets to its own sizeof, so a newer libgrove.so (with longer
//! structs) keeps serving it and fills in defaults for the rest.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::process::exit;
use std::ptr;

const GROVE_MAX_RANK: usize = 8;
const GROVE_DTYPE_F32: i32 = 1;
const GROVE_DEVICE_CPU: i32 = 0;
const GROVE_STATUS_INVALID_ARGUMENT: i32 = 3;

const FEATURES: usize = 16;
const CLASSES: usize = 4;

// Opaque handles.
#[repr(C)]
struct GroveStatus {
    _private: [u8; 0],
}
#[repr(C)]
struct GroveModel {
    _private: [u8; 0],
}
#[repr(C)]
struct GroveSession {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct GroveTensor {
    dtype: i32,
    rank: i32,
    dims: [i64; GROVE_MAX_RANK],
    data: *mut c_void,
    byte_size: usize,
}

impl GroveTensor {
    fn empty() -> GroveTensor {
        GroveTensor { dtype: 0, rank: 0, dims: [0; GROVE_MAX_RANK], data: ptr::null_mut(), byte_size: 0 }
    }
}

/// grove_session_options_t, version 1 (GROVE_SESSION_OPTIONS_SIZE_V1).
#[repr(C)]
struct GroveSessionOptionsV1 {
    struct_size: usize,
    device: i32,
    max_cached_plans: i32,
    cuda_device: i32,
    cuda_stream: *mut c_void,
    strict_device: i32,
    outputs_on_device: i32,
    gemm_math: i32,
    run_deadline_ms: i64,
    cancel_token: *mut c_void,
    max_body_runs: i64,
}

/// grove_session_stats_t, versions 1 and 2 (GROVE_SESSION_STATS_SIZE_V2).
#[repr(C)]
#[derive(Default)]
struct GroveSessionStatsV2 {
    struct_size: usize,
    runs: i64,
    plans_created: i64,
    plan_cache_hits: i64,
    plans_evicted: i64,
    kernels_run: i64,
    device_allocations: i64,
    device_synchronizations: i64,
    device_to_host_reads: i64,
    segments_run: i64,
    host_waits_inside_segments: i64,
    cpu_fallback_steps: i64,
    bytes_host_to_device: i64,
    bytes_device_to_host: i64,
}

#[link(name = "grove")]
extern "C" {
    fn grove_version() -> *const c_char;
    fn grove_status_code(status: *const GroveStatus) -> i32;
    fn grove_status_message(status: *const GroveStatus) -> *const c_char;
    fn grove_status_code_name(code: i32) -> *const c_char;
    fn grove_status_release(status: *mut GroveStatus);
    fn grove_model_load_file(path: *const c_char, out_model: *mut *mut GroveModel) -> *mut GroveStatus;
    fn grove_model_release(model: *mut GroveModel);
    fn grove_session_options_initialize_sized(out_options: *mut GroveSessionOptionsV1, struct_size: usize);
    fn grove_session_create(model: *const GroveModel, options: *const GroveSessionOptionsV1,
                            out_session: *mut *mut GroveSession) -> *mut GroveStatus;
    fn grove_session_release(session: *mut GroveSession);
    fn grove_session_run(session: *mut GroveSession, inputs: *const GroveTensor, n_inputs: usize,
                         outputs: *mut GroveTensor, n_outputs: usize) -> *mut GroveStatus;
    fn grove_session_run_into(session: *mut GroveSession, inputs: *const GroveTensor, n_inputs: usize,
                              outputs: *const GroveTensor, n_outputs: usize) -> *mut GroveStatus;
    fn grove_session_stats(session: *const GroveSession, out_stats: *mut GroveSessionStatsV2) -> *mut GroveStatus;
}

/// A grove error as a Rust value: the status code and grove's message.
#[derive(Debug)]
struct GroveError {
    code: i32,
    message: String,
}

impl std::fmt::Display for GroveError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let name = unsafe { CStr::from_ptr(grove_status_code_name(self.code)) };
        write!(f, "{} ({})", self.message, name.to_string_lossy())
    }
}

/// Turns a status into a Result, releasing the status.
fn check(status: *mut GroveStatus) -> Result<(), GroveError> {
    if status.is_null() {
        return Ok(());
    }
    let error = unsafe {
        GroveError {
            code: grove_status_code(status),
            message: CStr::from_ptr(grove_status_message(status)).to_string_lossy().into_owned(),
        }
    };
    unsafe { grove_status_release(status) };
    Err(error)
}

/// A loaded model; released on drop.
struct Model(*mut GroveModel);

impl Model {
    fn load(path: &str) -> Result<Model, GroveError> {
        let c_path = CString::new(path).map_err(|_| GroveError {
            code: GROVE_STATUS_INVALID_ARGUMENT,
            message: "the path holds a NUL byte".to_string(),
        })?;
        let mut handle = ptr::null_mut();
        check(unsafe { grove_model_load_file(c_path.as_ptr(), &mut handle) })?;
        Ok(Model(handle))
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { grove_model_release(self.0) };
    }
}

/// A session (it keeps its model alive); used by one thread at a time, so
/// it is neither Send nor Sync here (the raw pointer sees to that).
struct Session(*mut GroveSession);

impl Session {
    fn new(model: &Model) -> Result<Session, GroveError> {
        let mut options: GroveSessionOptionsV1 = unsafe { std::mem::zeroed() };
        // The library writes its defaults for the fields within our size.
        unsafe { grove_session_options_initialize_sized(&mut options, std::mem::size_of::<GroveSessionOptionsV1>()) };
        options.device = GROVE_DEVICE_CPU;
        let mut handle = ptr::null_mut();
        check(unsafe { grove_session_create(model.0, &options, &mut handle) })?;
        Ok(Session(handle))
    }

    /// Runs with x [batch, 16]; the session lends y (copied out here).
    fn run(&mut self, x: &[f32], batch: usize) -> Result<Vec<f32>, GroveError> {
        let input = f32_tensor(x.as_ptr() as *mut c_void, &[batch, x.len() / batch.max(1)], x.len());
        let mut output = GroveTensor::empty(); // data NULL: the session fills it
        check(unsafe { grove_session_run(self.0, &input, 1, &mut output, 1) })?;
        if output.dtype != GROVE_DTYPE_F32 || output.rank != 2 || output.dims[0] != batch as i64
            || output.dims[1] != CLASSES as i64 {
            return Err(GroveError { code: 13, message: format!("unexpected output {:?}", &output.dims[..2]) });
        }
        // Valid until the next run on this session: copy it now.
        let y = unsafe { std::slice::from_raw_parts(output.data as *const f32, batch * CLASSES) };
        Ok(y.to_vec())
    }

    /// Runs with x [batch, 16], grove writing y into our own buffer.
    fn run_into(&mut self, x: &[f32], batch: usize, y: &mut [f32]) -> Result<(), GroveError> {
        let input = f32_tensor(x.as_ptr() as *mut c_void, &[batch, x.len() / batch.max(1)], x.len());
        let output = f32_tensor(y.as_mut_ptr() as *mut c_void, &[batch, CLASSES], y.len());
        check(unsafe { grove_session_run_into(self.0, &input, 1, &output, 1) })
    }

    fn stats(&self) -> Result<GroveSessionStatsV2, GroveError> {
        let mut stats = GroveSessionStatsV2::default();
        stats.struct_size = std::mem::size_of::<GroveSessionStatsV2>();
        check(unsafe { grove_session_stats(self.0, &mut stats) })?;
        Ok(stats)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        unsafe { grove_session_release(self.0) };
    }
}

fn f32_tensor(data: *mut c_void, dims: &[usize], elements: usize) -> GroveTensor {
    let mut t = GroveTensor::empty();
    t.dtype = GROVE_DTYPE_F32;
    t.rank = dims.len() as i32;
    for (i, d) in dims.iter().enumerate() {
        t.dims[i] = *d as i64;
    }
    t.data = data;
    t.byte_size = elements * std::mem::size_of::<f32>();
    t
}

/// Prints the rows as examples/mlp_c.c does; false if a row does not sum to 1.
fn print_rows(batch: usize, y: &[f32]) -> bool {
    let mut ok = true;
    println!("batch {}:", batch);
    for r in 0..batch {
        let row = &y[r * CLASSES..(r + 1) * CLASSES];
        let line: Vec<String> = row.iter().map(|v| format!("{:.5}", v)).collect();
        let sum: f32 = row.iter().sum();
        println!("  y[{}] = {}   (sum {:.5})", r, line.join(" "), sum);
        ok &= (sum - 1.0).abs() <= 1e-4;
    }
    ok
}

fn inputs(batch: usize) -> Vec<f32> {
    // Deterministic, as in mlp_c.c: x[r] = sin(0.37 r).
    (0..batch * FEATURES).map(|r| (0.37f32 * r as f32).sin()).collect()
}

fn run(path: &str) -> Result<bool, GroveError> {
    let model = Model::load(path)?;
    let mut session = Session::new(&model)?;
    drop(model); // the session keeps the model alive

    let mut ok = print_rows(1, &session.run(&inputs(1), 1)?);
    let mut y = vec![0f32; 3 * CLASSES];
    session.run_into(&inputs(3), 3, &mut y)?;
    ok &= print_rows(3, &y);

    // Errors are values: a wrong feature count is refused with grove's
    // message, and the session stays usable.
    match session.run(&[0f32; 2 * 15], 2) {
        Err(e) if e.code == GROVE_STATUS_INVALID_ARGUMENT => println!("refused as expected: {}", e),
        Err(e) => return Err(e),
        Ok(_) => {
            eprintln!("a [2, 15] input was not refused");
            ok = false;
        }
    }
    match Model::load("/nonexistent/model.grove") {
        Err(e) => println!("refused as expected: {}", e),
        Ok(_) => {
            eprintln!("a missing file loaded");
            ok = false;
        }
    }

    let stats = session.stats()?;
    println!("runs {}, plans created {}, CPU fallback steps {}", stats.runs, stats.plans_created,
             stats.cpu_fallback_steps);
    Ok(ok)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: {} MODEL.grove", args[0]);
        exit(2);
    }
    println!("grove {}", unsafe { CStr::from_ptr(grove_version()) }.to_string_lossy());
    match run(&args[1]) {
        Ok(true) => println!("OK"),
        Ok(false) => {
            eprintln!("FAILED");
            exit(1);
        }
        Err(e) => {
            eprintln!("{}: {}", args[1], e);
            exit(1);
        }
    }
}
