// The ONNX importer on small ModelProtos built here: symbols, weights,
// constant folding, If/Loop bodies with outer-scope reads, and every way an
// import must fail (with the ONNX node named in the message).
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/runtime/registry.h"
#include "tools/onnx/onnx_importer.h"
#include "tools/onnx/onnx_tensor.h"

namespace grove::onnx_import {
namespace {

namespace fs = std::filesystem;
using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A dim for MakeInput: a value, a dim_param, or (kUnnamed) neither.
struct OnnxDim {
  OnnxDim(int64_t v) : value(v) {}      // NOLINT
  OnnxDim(const char* p) : param(p) {}  // NOLINT
  int64_t value = -1;
  std::string param;
};
const OnnxDim kUnnamed = OnnxDim(int64_t{-1});

ModelProto NewModel(int opset = 17) {
  ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("importer_test");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("main");
  return m;
}

void AddInput(GraphProto* g, const std::string& name, int elem_type, std::initializer_list<OnnxDim> dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const OnnxDim& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.param.empty()) {
      dim->set_dim_param(d.param);
    } else if (d.value >= 0) {
      dim->set_dim_value(d.value);
    }
  }
}

void AddOutput(GraphProto* g, const std::string& name) { g->add_output()->set_name(name); }

NodeProto* AddNode(GraphProto* g, const std::string& op, std::initializer_list<std::string> inputs,
                   std::initializer_list<std::string> outputs, const std::string& name = "") {
  NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return n;
}

void SetInt(NodeProto* n, const std::string& name, int64_t v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}

void SetInts(NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

GraphProto* SetGraph(NodeProto* n, const std::string& name) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

TensorProto FloatTensor(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float f : v) t.add_float_data(f);
  return t;
}

TensorProto Int64Tensor(const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t x : v) t.add_int64_data(x);
  return t;
}

NodeProto* AddConstant(GraphProto* g, const std::string& out, const TensorProto& value) {
  NodeProto* n = AddNode(g, "Constant", {}, {out}, out + "_node");
  AttributeProto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(AttributeProto::TENSOR);
  *a->mutable_t() = value;
  return n;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

struct Imported {
  std::shared_ptr<const Model> model;
  ImportReport report;
};

absl::StatusOr<Imported> Import(const ModelProto& m, const ImportOptions& options = {}) {
  Imported out;
  absl::StatusOr<std::vector<uint8_t>> bytes = ImportOnnxModel(m, "", options, &out.report);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return model.status();
  out.model = *model;
  return out;
}

std::unique_ptr<Session> CpuSession(const std::shared_ptr<const Model>& model) {
  SessionOptions so;
  so.device = Device::kCpu;
  return Session::Create(model, so).value();
}

template <typename T>
std::vector<T> Values(const TensorView& t) {
  return std::vector<T>(t.as<const T>(), t.as<const T>() + t.num_elements());
}

int OpCount(const Model& model, const std::string& type) {
  for (const auto& [op, n] : model.Summary().op_counts) {
    if (op == type) return n;
  }
  return 0;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("GROVE_TEST_TMP");
  fs::path dir = fs::path(base != nullptr ? base : ::testing::TempDir()) / "onnx_importer_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// --- symbols -----------------------------------------------------------------

ModelProto ReluModel() {
  ModelProto m = NewModel();
  AddInput(m.mutable_graph(), "x", TensorProto::FLOAT, {"batch", kUnnamed, 4});
  AddNode(m.mutable_graph(), "Relu", {"x"}, {"y"}, "relu");
  AddOutput(m.mutable_graph(), "y");
  return m;
}

TEST(OnnxImporter, DynamicDimsBecomeSymbolsWithDefaultRanges) {
  absl::StatusOr<Imported> r = Import(ReluModel());
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<SymbolInfo>& symbols = r->model->symbols();
  ASSERT_EQ(symbols.size(), 2u);
  EXPECT_EQ(symbols[0].name, "batch");
  EXPECT_EQ(symbols[0].min, 0);  // an empty KV cache (past = 0) is a real input
  EXPECT_EQ(symbols[0].max, 4096);
  EXPECT_EQ(symbols[1].name, "x_d1");  // generated for the unnamed dim
  const TensorInfo& x = r->model->inputs()[0];
  ASSERT_EQ(x.shape.size(), 3u);
  EXPECT_EQ(x.shape[0].symbol, "batch");
  EXPECT_EQ(x.shape[1].symbol, "x_d1");
  EXPECT_FALSE(x.shape[2].is_symbolic());
  EXPECT_EQ(x.shape[2].value, 4);
  EXPECT_EQ(r->report.symbols.size(), 2u);
  EXPECT_EQ(r->report.nodes_imported, 1);

  std::vector<float> in(2 * 3 * 4, -1.0f);
  in[5] = 2.5f;
  auto session = CpuSession(r->model);
  auto out = session->Run({TensorView(DType::kF32, {2, 3, 4}, in.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(Values<float>((*out)[0])[5], 2.5f);
  EXPECT_EQ(Values<float>((*out)[0])[0], 0.0f);
  // A dim of 0 is inside the default range (ONNX allows empty tensors).
  auto empty = session->Run({TensorView(DType::kF32, {0, 3, 4}, in.data())});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)[0].shape, (std::vector<int64_t>{0, 3, 4}));
}

TEST(OnnxImporter, DimOptionsOverrideRanges) {
  ImportOptions options;
  options.dim_ranges["batch"] = {2, 8};
  options.dim_ranges["x_d1"] = {1, 16};
  absl::StatusOr<Imported> r = Import(ReluModel(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model->symbols()[0].min, 2);
  EXPECT_EQ(r->model->symbols()[0].max, 8);
  EXPECT_EQ(r->model->symbols()[1].max, 16);
  // Outside the range: the session refuses the input.
  std::vector<float> in(1 * 3 * 4);
  auto session = CpuSession(r->model);
  EXPECT_FALSE(session->Run({TensorView(DType::kF32, {1, 3, 4}, in.data())}).ok());
}

TEST(OnnxImporter, DimOptionForAnUnknownNameFails) {
  ImportOptions options;
  options.dim_ranges["seq"] = {1, 8};
  absl::StatusOr<Imported> r = Import(ReluModel(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Msg(r.status()), HasSubstr("no dynamic dim named seq"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("batch, x_d1"));
}

TEST(OnnxImporter, InputWithoutShapeNeedsARank) {
  ModelProto m = NewModel();
  auto* in = m.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  AddNode(m.mutable_graph(), "Relu", {"x"}, {"y"});
  AddOutput(m.mutable_graph(), "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Msg(r.status()), HasSubstr("input 'x' declares no shape"));

  ImportOptions options;
  options.input_ranks["x"] = 2;
  r = Import(m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->model->inputs()[0].shape.size(), 2u);
  EXPECT_TRUE(r->model->inputs()[0].shape[0].is_symbolic());
  EXPECT_TRUE(r->model->inputs()[0].shape[1].is_symbolic());
}

// --- weights -----------------------------------------------------------------

TEST(OnnxImporter, InitializersBecomeWeightsNotInputs) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 3});
  // Listed as a graph input too (IR < 4 style): still a weight.
  AddInput(g, "w", TensorProto::FLOAT, {3, 2});
  *g->add_initializer() = FloatTensor("w", {3, 2}, {1, 0, 0, 1, 1, 1});
  TensorProto b;
  b.set_name("b");
  b.set_data_type(TensorProto::FLOAT);
  b.add_dims(2);
  const float bias[2] = {10, 20};
  b.set_raw_data(std::string(reinterpret_cast<const char*>(bias), sizeof(bias)));
  *g->add_initializer() = b;
  *g->add_initializer() = FloatTensor("unused", {1}, {7});
  AddNode(g, "MatMul", {"x", "w"}, {"xw"}, "mm");
  AddNode(g, "Add", {"xw", "b"}, {"y"}, "add");
  AddOutput(g, "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->model->inputs().size(), 1u);
  EXPECT_EQ(r->model->inputs()[0].name, "x");
  EXPECT_EQ(r->report.weights, 2);  // the unused initializer is dropped
  EXPECT_EQ(r->model->Summary().weight_bytes, 6 * 4 + 2 * 4u);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kF32, {2, 3}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(14, 25, 20, 31));
}

TEST(OnnxImporter, TypedDataFieldsDecode) {
  TensorProto h;
  h.set_data_type(TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3c00);  // 1.0
  h.add_int32_data(0xc000);  // -2.0
  absl::StatusOr<Tensor> t = DecodeTensor(h, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kF16);
  EXPECT_EQ(t->as<uint16_t>()[1], 0xc000);

  TensorProto b;
  b.set_data_type(TensorProto::BOOL);
  b.add_dims(3);
  for (int v : {0, 1, 5}) b.add_int32_data(v);
  t = DecodeTensor(b, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kBool);
  EXPECT_EQ(t->as<uint8_t>()[2], 1);

  TensorProto i8;
  i8.set_data_type(TensorProto::INT8);
  i8.add_dims(2);
  i8.add_int32_data(-3);
  i8.add_int32_data(100);
  t = DecodeTensor(i8, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->as<int8_t>()[0], -3);

  TensorProto d;
  d.set_data_type(TensorProto::DOUBLE);
  d.add_double_data(2.25);  // a scalar
  t = DecodeTensor(d, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->shape().empty());
  EXPECT_EQ(t->as<double>()[0], 2.25);

  TensorProto i64 = Int64Tensor("i", {2}, {-1, 1LL << 40});
  t = DecodeTensor(i64, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->as<int64_t>()[1], 1LL << 40);

  // int16/uint16 live in int32_data, uint32/uint64 in uint64_data.
  TensorProto i16;
  i16.set_data_type(TensorProto::INT16);
  i16.add_dims(2);
  i16.add_int32_data(-32768);
  i16.add_int32_data(7);
  t = DecodeTensor(i16, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kI16);
  EXPECT_EQ(t->as<int16_t>()[0], -32768);

  TensorProto u16;
  u16.set_data_type(TensorProto::UINT16);
  u16.add_int32_data(65535);
  t = DecodeTensor(u16, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kU16);
  EXPECT_EQ(t->as<uint16_t>()[0], 65535);

  TensorProto u32;
  u32.set_data_type(TensorProto::UINT32);
  u32.add_dims(1);
  u32.add_uint64_data(4294967295u);
  t = DecodeTensor(u32, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kU32);
  EXPECT_EQ(t->as<uint32_t>()[0], 4294967295u);

  TensorProto u64;
  u64.set_data_type(TensorProto::UINT64);
  u64.add_dims(2);
  u64.add_uint64_data(1);
  u64.add_uint64_data(18446744073709551615ull);
  t = DecodeTensor(u64, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kU64);
  EXPECT_EQ(t->as<uint64_t>()[1], 18446744073709551615ull);

  TensorProto u64_short;  // one element declared, none given
  u64_short.set_data_type(TensorProto::UINT64);
  u64_short.add_dims(1);
  EXPECT_FALSE(DecodeTensor(u64_short, "").ok());

  TensorProto short_raw;
  short_raw.set_name("short");
  short_raw.set_data_type(TensorProto::FLOAT);
  short_raw.add_dims(4);
  short_raw.set_raw_data(std::string(8, '\0'));
  t = DecodeTensor(short_raw, "");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(Msg(t.status()), HasSubstr("tensor 'short': FLOAT[4] needs 16 bytes but raw_data has 8"));

  TensorProto huge;
  huge.set_data_type(TensorProto::FLOAT);
  huge.add_dims(int64_t{1} << 30);
  huge.add_dims(int64_t{1} << 30);
  EXPECT_FALSE(DecodeTensor(huge, "").ok());
}

TEST(OnnxImporter, ConstantNodesBecomeWeights) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2});
  AddConstant(g, "c", FloatTensor("", {2}, {1.5f, -1.0f}));
  NodeProto* k = AddNode(g, "Constant", {}, {"k"}, "k_node");
  AttributeProto* a = k->add_attribute();
  a->set_name("value_float");
  a->set_type(AttributeProto::FLOAT);
  a->set_f(2.0f);
  NodeProto* ints = AddNode(g, "Constant", {}, {"ints"}, "ints_node");
  a = ints->add_attribute();
  a->set_name("value_ints");
  a->set_type(AttributeProto::INTS);
  a->add_ints(3);
  a->add_ints(4);
  AddNode(g, "Add", {"x", "c"}, {"xc"}, "add");
  AddNode(g, "Mul", {"xc", "k"}, {"y"}, "mul");
  AddOutput(g, "y");
  AddOutput(g, "ints");  // a constant straight to an output
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.constant_nodes, 3);
  EXPECT_EQ(r->report.nodes_imported, 2);
  std::vector<float> x = {1, 2};
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kF32, {2}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(5, 2));
  EXPECT_EQ((*out)[1].dtype, DType::kI64);
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(3, 4));
}

// --- constant folding --------------------------------------------------------

TEST(OnnxImporter, FoldsConstantShapeArithmeticAndKeepsInputDependentOps) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {"batch", 6});
  *g->add_initializer() = FloatTensor("c", {2, 3}, {0, 0, 0, 0, 0, 0});
  *g->add_initializer() = Int64Tensor("one", {1}, {1});
  AddConstant(g, "minus_one", Int64Tensor("", {1}, {-1}));
  // Shape(c) -> Gather -> Concat: all constant, folded to [-1, 3].
  AddNode(g, "Shape", {"c"}, {"c_shape"}, "shape_c");
  AddNode(g, "Gather", {"c_shape", "one"}, {"c_cols"}, "gather_c");
  NodeProto* concat = AddNode(g, "Concat", {"minus_one", "c_cols"}, {"new_shape"}, "concat");
  SetInt(concat, "axis", 0);
  AddNode(g, "Reshape", {"x", "new_shape"}, {"y"}, "reshape");
  // Shape(x) depends on the input: kept.
  AddNode(g, "Shape", {"x"}, {"x_shape"}, "shape_x");
  AddOutput(g, "y");
  AddOutput(g, "x_shape");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.constants_folded, 3);
  EXPECT_EQ(r->report.nodes_imported, 2);
  EXPECT_EQ(OpCount(*r->model, "Gather"), 0);
  EXPECT_EQ(OpCount(*r->model, "Concat"), 0);
  EXPECT_EQ(OpCount(*r->model, "Shape"), 1);
  EXPECT_EQ(OpCount(*r->model, "Reshape"), 1);
  EXPECT_EQ(r->report.weights, 1);  // new_shape only; c and one fed folded nodes

  std::vector<float> x(3 * 6, 1.0f);
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kF32, {3, 6}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{6, 3}));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(3, 6));
}

TEST(OnnxImporter, FoldsShapeOfInputsWithConstantDims) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 3});
  AddInput(g, "d", TensorProto::FLOAT, {"n"});
  AddNode(g, "Shape", {"x"}, {"x_shape"}, "shape_x");  // [2, 3] whatever x holds
  AddNode(g, "Reshape", {"x", "x_shape"}, {"y"}, "reshape");
  AddNode(g, "Shape", {"d"}, {"d_shape"}, "shape_d");  // n is known only when run
  AddOutput(g, "y");
  AddOutput(g, "d_shape");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.constants_folded, 1);
  EXPECT_EQ(OpCount(*r->model, "Shape"), 1);
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, d = {0, 0, 0};
  auto session = CpuSession(r->model);
  auto out = session->Run({TensorView(DType::kF32, {2, 3}, x.data()), TensorView(DType::kF32, {3}, d.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(3));
}

TEST(OnnxImporter, NoFoldKeepsConstantOps) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  *g->add_initializer() = FloatTensor("c", {2, 3}, {0, 0, 0, 0, 0, 0});
  AddInput(g, "x", TensorProto::FLOAT, {1});
  AddNode(g, "Shape", {"c"}, {"s"}, "shape_c");
  AddNode(g, "Relu", {"x"}, {"y"});
  AddOutput(g, "s");
  AddOutput(g, "y");
  ImportOptions options;
  options.fold_constants = false;
  absl::StatusOr<Imported> r = Import(m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.constants_folded, 0);
  EXPECT_EQ(OpCount(*r->model, "Shape"), 1);
}

TEST(OnnxImporter, CastTakesGroveDTypes) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {3});
  SetInt(AddNode(g, "Cast", {"x"}, {"y"}, "cast"), "to", TensorProto::INT64);
  AddOutput(g, "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> x = {1.0f, -2.0f, 3.0f};
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kF32, {3}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DType::kI64);
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(1, -2, 3));
}

TEST(OnnxImporter, EmptyInputNamesAreOmittedInputs) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {6});
  *g->add_initializer() = Int64Tensor("starts", {1}, {1});
  *g->add_initializer() = Int64Tensor("ends", {1}, {6});
  *g->add_initializer() = Int64Tensor("steps", {1}, {2});
  AddNode(g, "Slice", {"x", "starts", "ends", "", "steps"}, {"y"}, "middle");
  AddNode(g, "Slice", {"x", "starts", "ends", "", ""}, {"z"}, "trailing");
  AddOutput(g, "y");
  AddOutput(g, "z");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> x = {0, 1, 2, 3, 4, 5};
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kF32, {6}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 3, 5));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAre(1, 2, 3, 4, 5));
}

TEST(OnnxImporter, ConstantOfShapeValueBecomesAnInput) {
  const ir::OpDef* def = runtime::GlobalOpRegistry().Find("ConstantOfShape");
  if (def == nullptr || def->max_inputs == 1)
    GTEST_SKIP() << "this grove has no ConstantOfShape with a value input";
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "n", TensorProto::INT64, {1});
  NodeProto* n = AddNode(g, "ConstantOfShape", {"n"}, {"y"}, "fill");
  AttributeProto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(AttributeProto::TENSOR);
  *a->mutable_t() = FloatTensor("", {1}, {2.5f});
  AddOutput(g, "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t shape = 3;
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kI64, {1}, &shape)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(2.5f, 2.5f, 2.5f));
}

TEST(OnnxImporter, SoftmaxBeforeOpset13FlattensAtItsAxis) {
  ModelProto m = NewModel(12);
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 2, 2});
  AddNode(g, "Softmax", {"x"}, {"y"}, "softmax");  // axis 1: rows of 4
  SetInt(AddNode(g, "Softmax", {"x"}, {"z"}, "last"), "axis", -1);
  AddOutput(g, "y");
  AddOutput(g, "z");
  absl::StatusOr<Imported> r = Import(m);
  if (runtime::GlobalOpRegistry().Find("Flatten") == nullptr) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(Msg(r.status()), HasSubstr("node 'softmax' (op Softmax): at opset 12 it normalises the input "
                                           "flattened to 2-D at axis 1"));
    // axis -1 means the same at every opset and needs no rewrite.
    g->mutable_node()->DeleteSubrange(0, 1);
    g->mutable_output()->DeleteSubrange(0, 1);
    r = Import(m);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(OpCount(*r->model, "Softmax"), 1);
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> x = {0, 0, 0, 0, 1, 1, 1, 1};
  auto session = CpuSession(r->model);
  auto out = session->Run({TensorView(DType::kF32, {2, 2, 2}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 2, 2}));
  for (float v : Values<float>((*out)[0])) EXPECT_FLOAT_EQ(v, 0.25f);
  for (float v : Values<float>((*out)[1])) EXPECT_FLOAT_EQ(v, 0.5f);
}

// --- control flow ------------------------------------------------------------

TEST(OnnxImporter, IfBranchesReadOuterScopeAndGetUniqueNames) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "cond", TensorProto::BOOL, {});
  AddInput(g, "x", TensorProto::FLOAT, {2});
  *g->add_initializer() = FloatTensor("ten", {1}, {10});
  NodeProto* node = AddNode(g, "If", {"cond"}, {"y"}, "branch");
  // Both branches define "t" and "out", and "t" is also a main-graph name.
  GraphProto* then_g = SetGraph(node, "then_branch");
  AddNode(then_g, "Add", {"x", "ten"}, {"t"});
  AddNode(then_g, "Relu", {"t"}, {"out"});
  AddOutput(then_g, "out");
  GraphProto* else_g = SetGraph(node, "else_branch");
  AddNode(else_g, "Sub", {"x", "ten"}, {"t"});
  AddNode(else_g, "Identity", {"t"}, {"out"});
  AddOutput(else_g, "out");
  AddNode(g, "Relu", {"x"}, {"t"}, "main_t");
  AddOutput(g, "y");
  AddOutput(g, "t");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.subgraphs, 2);
  EXPECT_EQ(r->model->Summary().num_subgraphs, 3);
  EXPECT_EQ(r->model->outputs()[1].name, "t");  // the main graph keeps its names

  std::vector<float> x = {1, -2};
  auto session = CpuSession(r->model);
  bool c = true;
  auto out = session->Run({TensorView(DType::kBool, {}, &c), TensorView(DType::kF32, {2}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(11, 8));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAre(1, 0));
  c = false;
  out = session->Run({TensorView(DType::kBool, {}, &c), TensorView(DType::kF32, {2}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(-9, -12));
}

TEST(OnnxImporter, LoopBodyReadsOuterScope) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "trips", TensorProto::INT64, {});
  AddInput(g, "v0", TensorProto::FLOAT, {2});
  AddInput(g, "step", TensorProto::FLOAT, {2});
  *g->add_initializer() = FloatTensor("half", {1}, {0.5f});
  NodeProto* loop = AddNode(g, "Loop", {"trips", "", "v0"}, {"v_final", "trace"}, "loop");
  GraphProto* body = SetGraph(loop, "body");
  AddInput(body, "i", TensorProto::INT64, {});
  AddInput(body, "cond_in", TensorProto::BOOL, {});
  AddInput(body, "v", TensorProto::FLOAT, {2});
  AddNode(body, "Add", {"v", "step"}, {"v_step"});       // outer input
  AddNode(body, "Mul", {"v_step", "half"}, {"v_next"});  // outer initializer
  AddNode(body, "Identity", {"cond_in"}, {"cond_out"});
  AddNode(body, "Identity", {"v_next"}, {"v_copy"});
  AddOutput(body, "cond_out");
  AddOutput(body, "v_next");
  AddOutput(body, "v_copy");
  AddOutput(g, "v_final");
  AddOutput(g, "trace");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t trips = 2;
  std::vector<float> v0 = {4, 8}, step = {2, 0};
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kI64, {}, &trips), TensorView(DType::kF32, {2}, v0.data()),
                           TensorView(DType::kF32, {2}, step.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  // (4+2)/2 = 3, (3+2)/2 = 2.5; (8+0)/2 = 4, 4/2 = 2.
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(2.5f, 2));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(Values<float>((*out)[1]), ElementsAre(3, 4, 2.5f, 2));
}

// --- errors ------------------------------------------------------------------

TEST(OnnxImporter, UnsupportedOpNamesTheNode) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2});
  AddNode(g, "Relu", {"x"}, {"r"}, "ok_node");
  AddNode(g, "Col2Im", {"r"}, {"y"}, "Conv_12");
  AddOutput(g, "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Msg(r.status()), "node 'Conv_12' (op Col2Im): not supported by grove");
}

TEST(OnnxImporter, UnsupportedAttributeNamesTheNode) {
  ModelProto m = ReluModel();
  SetInt(m.mutable_graph()->mutable_node(0), "foo", 1);
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Msg(r.status()), "attribute 'foo' of node 'relu' (op Relu) is not supported by grove");
}

TEST(OnnxImporter, OtherDomainsAreRefused) {
  ModelProto m = ReluModel();
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Msg(r.status()), HasSubstr("node 'relu' (op Relu): domain 'com.microsoft' is not supported"));
}

TEST(OnnxImporter, UnsupportedDTypesAreErrors) {
  {
    ModelProto m = NewModel();
    AddInput(m.mutable_graph(), "z", TensorProto::COMPLEX128, {2});
    AddNode(m.mutable_graph(), "Identity", {"z"}, {"y"});
    AddOutput(m.mutable_graph(), "y");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("input 'z': dtype COMPLEX128 is not supported by grove (it has "));
    EXPECT_THAT(Msg(r.status()), HasSubstr(" bool string)"));
  }
  {
    ModelProto m = NewModel();
    GraphProto* g = m.mutable_graph();
    TensorProto t;
    t.set_name("c64");
    t.set_data_type(TensorProto::COMPLEX64);
    t.add_dims(1);
    t.add_float_data(1);
    t.add_float_data(2);
    *g->add_initializer() = t;
    AddNode(g, "Identity", {"c64"}, {"y"});
    AddOutput(g, "y");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("tensor 'c64': dtype COMPLEX64 is not supported by grove"));
  }
  {
    ModelProto m = NewModel();
    AddInput(m.mutable_graph(), "x", TensorProto::FLOAT, {2});
    SetInt(AddNode(m.mutable_graph(), "Cast", {"x"}, {"y"}, "to_complex"), "to", TensorProto::COMPLEX64);
    AddOutput(m.mutable_graph(), "y");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()),
                HasSubstr("attribute 'to' of node 'to_complex' (op Cast): dtype COMPLEX64 is not supported by grove"));
  }
}

// --- strings -------------------------------------------------------------------

TensorProto StringTensor(const std::string& name, std::vector<int64_t> dims, const std::vector<std::string>& v) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(TensorProto::STRING);
  for (int64_t d : dims) t.add_dims(d);
  for (const std::string& s : v) t.add_string_data(s);
  return t;
}

std::vector<std::string> StringValues(const TensorView& t) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.emplace_back(t.as<const StringRef>()[i].view());
  return out;
}

TEST(OnnxImporter, StringInitializersAndConstantsBecomeStringWeights) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "idx", TensorProto::INT64, {2});
  *g->add_initializer() = StringTensor("vocab", {2, 2}, {"", "M\xc3\xbcller", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80"});
  AddConstant(g, "c", StringTensor("", {3}, {"a", "", std::string("nul\0in", 6)}));
  NodeProto* one = AddNode(g, "Constant", {}, {"one"}, "one_node");
  AttributeProto* a = one->add_attribute();
  a->set_name("value_string");
  a->set_type(AttributeProto::STRING);
  a->set_s("solo");
  NodeProto* many = AddNode(g, "Constant", {}, {"many"}, "many_node");
  a = many->add_attribute();
  a->set_name("value_strings");
  a->set_type(AttributeProto::STRINGS);
  a->add_strings("x");
  a->add_strings("yz");
  AddNode(g, "Gather", {"c", "idx"}, {"picked"}, "gather");  // reads an input: c stays a weight
  AddOutput(g, "vocab");
  AddOutput(g, "picked");
  AddOutput(g, "one");
  AddOutput(g, "many");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.constant_nodes, 3);
  EXPECT_EQ(r->report.nodes_imported, 1);
  EXPECT_EQ(r->report.weights, 4);
  // An end offset (8 bytes) per string plus the text: 4*8+17, 3*8+7, 8+4, 2*8+3.
  EXPECT_EQ(r->report.weight_bytes, uint64_t{49 + 31 + 12 + 19});
  for (const TensorInfo& info : r->model->outputs()) EXPECT_EQ(info.dtype, DType::kString) << info.name;

  std::vector<int64_t> idx = {2, 0};
  auto session = CpuSession(r->model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kI64, {2}, idx.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(StringValues((*out)[0]),
              ElementsAre("", "M\xc3\xbcller", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80"));
  EXPECT_THAT(StringValues((*out)[1]), ElementsAre(std::string("nul\0in", 6), "a"));
  EXPECT_TRUE((*out)[2].shape.empty());
  EXPECT_THAT(StringValues((*out)[2]), ElementsAre("solo"));
  EXPECT_EQ((*out)[3].shape, (std::vector<int64_t>{2}));
  EXPECT_THAT(StringValues((*out)[3]), ElementsAre("x", "yz"));
}

TEST(OnnxImporter, StringInputsAreDeclaredAsStrings) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "s", TensorProto::STRING, {"n"});
  AddInput(g, "t", TensorProto::STRING, {2, 3});
  AddInput(g, "x", TensorProto::FLOAT, {2});
  AddNode(g, "Identity", {"s"}, {"y"}, "identity");
  AddNode(g, "Shape", {"t"}, {"t_shape"}, "shape_t");  // constant dims: folded
  SetInt(AddNode(g, "Cast", {"x"}, {"x_text"}, "to_string"), "to", TensorProto::STRING);
  AddOutput(g, "y");
  AddOutput(g, "t_shape");
  AddOutput(g, "x_text");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->model->inputs().size(), 3u);
  EXPECT_EQ(r->model->inputs()[0].dtype, DType::kString);
  EXPECT_EQ(r->model->inputs()[1].dtype, DType::kString);
  EXPECT_EQ(r->model->outputs()[0].dtype, DType::kString);
  EXPECT_EQ(r->model->outputs()[2].dtype, DType::kString);  // Cast's 'to' became grove's kString
  EXPECT_EQ(r->report.constants_folded, 1);
  EXPECT_EQ(OpCount(*r->model, "Shape"), 0);

  const StringRef s[3] = {StringRef("hello"), StringRef(""), StringRef("w\xc3\xb6rld")};
  const StringRef t[6] = {};
  SessionOptions so;
  so.device = Device::kCpu;
  auto session = Session::Create(r->model, so).value();
  std::vector<float> x = {1.5f, 0.25f};
  auto out = session->Run({TensorView(DType::kString, {3}, s), TensorView(DType::kString, {2, 3}, t),
                           TensorView(DType::kF32, {2}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(StringValues((*out)[0]), ElementsAre("hello", "", "w\xc3\xb6rld"));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(2, 3));
  EXPECT_THAT(StringValues((*out)[2]), ElementsAre("1.5", "0.25"));
}

TEST(OnnxImporter, StringOpsOnConstantsFoldToStringWeights) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  *g->add_initializer() = StringTensor("vocab", {4}, {"zero", "", "zw\xc3\xb6lf", "three"});
  *g->add_initializer() = Int64Tensor("pick", {3}, {3, 2, 1});
  *g->add_initializer() = Int64Tensor("shape", {2}, {3, 1});
  AddNode(g, "Gather", {"vocab", "pick"}, {"picked"}, "gather");
  AddNode(g, "Reshape", {"picked", "shape"}, {"y"}, "reshape");
  AddOutput(g, "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.constants_folded, 2);
  EXPECT_EQ(r->report.nodes_imported, 0);
  EXPECT_EQ(r->report.weights, 1);
  EXPECT_EQ(r->report.weight_bytes, uint64_t{3 * 8 + 5 + 6 + 0});
  auto session = CpuSession(r->model);
  auto out = session->Run({});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DType::kString);
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{3, 1}));
  EXPECT_THAT(StringValues((*out)[0]), ElementsAre("three", "zw\xc3\xb6lf", ""));
}

TEST(OnnxImporter, MalformedStringTensorsAreErrors) {
  TensorProto short_strings = StringTensor("words", {3}, {"a", "b"});
  absl::StatusOr<Tensor> t = DecodeTensor(short_strings, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(t.status()), HasSubstr("tensor 'words': STRING[3] has 3 elements but string_data holds 2"));

  TensorProto raw = StringTensor("raw", {1}, {});
  raw.set_raw_data("abc");
  t = DecodeTensor(raw, "");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(Msg(t.status()), HasSubstr("tensor 'raw': a STRING tensor must hold its strings in string_data"));

  TensorProto external = StringTensor("ext", {1}, {});
  external.set_data_location(TensorProto::EXTERNAL);
  auto* e = external.add_external_data();
  e->set_key("location");
  e->set_value("strings.bin");
  t = DecodeTensor(external, "/tmp");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Msg(t.status()), HasSubstr("tensor 'ext': a STRING tensor stored as external data is not supported"));

  TensorProto empty = StringTensor("none", {0, 2}, {});
  t = DecodeTensor(empty, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kString);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{0, 2}));
}

TEST(OnnxImporter, OpsetsAboveTwentyTwoAreRefused) {
  for (int opset : {23, 24}) {
    ModelProto m = ReluModel();
    m.mutable_opset_import(0)->set_version(opset);
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok()) << opset;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(Msg(r.status()), HasSubstr(absl::StrCat("opset ", opset, " is not supported")));
    EXPECT_THAT(Msg(r.status()), HasSubstr("11 through 22"));
  }
  for (int opset : {11, 13, 17, 18, 20, 22}) {
    ModelProto m = ReluModel();
    m.mutable_opset_import(0)->set_version(opset);
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_TRUE(r.ok()) << opset;
    EXPECT_EQ(r->report.opset, opset);
    EXPECT_EQ(r->report.converted_from_opset, 0);
  }
}

// Opset 18 moved Reduce*'s axes to an input and gave Split num_outputs; the
// dynamo exporter of PyTorch 2.x writes these forms.
TEST(OnnxImporter, OpsetEighteenForms) {
  ModelProto m = NewModel(18);
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 4});
  AddConstant(g, "axes", Int64Tensor("", {1}, {1}));
  NodeProto* max = AddNode(g, "ReduceMax", {"x", "axes"}, {"m"}, "max");
  SetInt(max, "keepdims", 0);
  NodeProto* split = AddNode(g, "Split", {"x"}, {"a", "b"}, "split");
  SetInt(split, "axis", 1);
  SetInt(split, "num_outputs", 2);
  NodeProto* cast = AddNode(g, "Cast", {"m"}, {"mi"}, "cast");
  SetInt(cast, "to", TensorProto::INT32);
  SetInt(cast, "saturate", 1);  // opset 19's attribute; only float8 casts read it
  AddOutput(g, "m");
  AddOutput(g, "b");
  AddOutput(g, "mi");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> x = {1, 5, 2, 3, -1, -2, 7, 0};
  auto session = CpuSession(r->model);
  auto out = session->Run({TensorView(DType::kF32, {2, 4}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{5, 7}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{2, 3, 7, 0}));
  EXPECT_EQ(Values<int32_t>((*out)[2]), (std::vector<int32_t>{5, 7}));
}

TEST(OnnxImporter, OpsetsBelowElevenAreConvertedToThirteen) {
  for (int opset : {6, 9, 10}) {
    ModelProto m = ReluModel();
    m.mutable_opset_import(0)->set_version(opset);
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_TRUE(r.ok()) << opset << ": " << r.status();
    EXPECT_EQ(r->report.opset, kUpgradeOpset);
    EXPECT_EQ(r->report.converted_from_opset, opset);
  }
  // Opset 9 Softmax flattens at axis 1; after conversion it still does.
  ModelProto m = NewModel(9);
  AddInput(m.mutable_graph(), "x", TensorProto::FLOAT, {2, 2, 2});
  AddNode(m.mutable_graph(), "Softmax", {"x"}, {"y"}, "softmax");
  AddOutput(m.mutable_graph(), "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  std::unique_ptr<Session> session = CpuSession(r->model);
  std::vector<float> x = {0, 1, 2, 3, 0, 0, 0, 0};
  auto out = session->Run({TensorView(DType::kF32, {2, 2, 2}, x.data())});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* y = (*out)[0].as<const float>();
  float sum = 0;
  for (int i = 0; i < 4; ++i) sum += std::exp(x[i]);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], std::exp(x[i]) / sum, 1e-6) << i;
  for (int i = 4; i < 8; ++i) EXPECT_NEAR(y[i], 0.25f, 1e-6) << i;
  // The caller's model is not changed.
  EXPECT_EQ(m.opset_import(0).version(), 9);
}

TEST(OnnxImporter, AVersionConverterFailureNamesTheOp) {
  // Pad changed at opset 2 and the converter has no adapter for it.
  ModelProto m = NewModel(1);
  AddInput(m.mutable_graph(), "x", TensorProto::FLOAT, {2, 2});
  SetInts(AddNode(m.mutable_graph(), "Pad", {"x"}, {"y"}, "pad"), "paddings", {0, 0, 0, 0});
  AddOutput(m.mutable_graph(), "y");
  absl::StatusOr<Imported> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_THAT(Msg(r.status()), HasSubstr("version converter failed"));
  EXPECT_THAT(Msg(r.status()), HasSubstr("Pad"));
}

// Malformed old-opset models once crashed libonnx's shape inference or
// version converter inside grove (SIGFPE, wild reads) or hung it. Names are
// checked first; the conversion runs in a child process, whose crash is an
// error; models too large for the (quadratic) converter are refused at once.
ModelProto OldOpsetModel(const std::string& op, std::vector<int64_t> x_dims) {
  ModelProto m = NewModel(9);
  m.set_ir_version(4);
  GraphProto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  for (int64_t d : x_dims) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  AddNode(g, op, {"x"}, {"y"}, "bad");
  AddOutput(g, "y");
  return m;
}

TEST(OnnxImporter, MalformedOldOpsetModelsFailCleanly) {
  {
    ModelProto m = ReluModel();
    m.mutable_opset_import(0)->set_version(9);
    m.mutable_graph()->mutable_output(0)->set_name("nothing");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(r.status()), HasSubstr("output 'nothing' names nothing"));
  }
  {
    ModelProto m = ReluModel();
    m.mutable_opset_import(0)->set_version(9);
    m.mutable_graph()->mutable_node(0)->set_input(0, "nope");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("node 'relu' (op Relu) reads 'nope', which no graph input"));
  }
  {
    // Zero strides: ONNX's Conv shape inference divides by them (SIGFPE).
    ModelProto m = OldOpsetModel("Conv", {1, 1, 8, 8});
    *m.mutable_graph()->add_initializer() = FloatTensor("w", {2, 1, 3, 3}, std::vector<float>(18, 1.0f));
    m.mutable_graph()->mutable_node(0)->add_input("w");
    SetInts(m.mutable_graph()->mutable_node(0), "strides", {0, 0});
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {
    ModelProto m = OldOpsetModel("MaxPool", {1, 1, 8, 8});
    SetInts(m.mutable_graph()->mutable_node(0), "kernel_shape", {2, 2});
    SetInts(m.mutable_graph()->mutable_node(0), "strides", {0, 0});
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {
    // blocksize 2^32: its square wraps to 0 in ONNX's shape inference.
    ModelProto m = OldOpsetModel("DepthToSpace", {1, 4, 2, 2});
    SetInt(m.mutable_graph()->mutable_node(0), "blocksize", int64_t{1} << 32);
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {
    // A Conv weight of rank 1 (ONNX's shape inference reads past its dims).
    ModelProto m = OldOpsetModel("Conv", {1, 1, 8, 8});
    *m.mutable_graph()->add_initializer() = FloatTensor("w", {2}, {1, 1});
    m.mutable_graph()->mutable_node(0)->add_input("w");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
  }
  {
    // ONNX's checker runs before the converter, and its refusal names the node.
    ModelProto m = OldOpsetModel("DepthToSpace", {1, 4, 2, 2});  // no blocksize
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(r.status()), HasSubstr("fails ONNX's checker: node 'bad' (op DepthToSpace)"));
  }
  {
    // An opset far past int32 is reported as it is, not wrapped to 0.
    ModelProto m = ReluModel();
    m.mutable_opset_import(0)->set_version(int64_t{1} << 62);
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("opset 4611686018427387904 is not supported"));
    m.mutable_opset_import(0)->set_version(-3);
    r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("opset -3"));
  }
}

ModelProto ReluChain(int n, int opset) {
  ModelProto m = NewModel(opset);
  if (opset < 11) m.set_ir_version(4);
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {1, 4});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    const std::string out = absl::StrCat("v", i);
    AddNode(g, "Relu", {prev}, {out});
    prev = out;
  }
  AddOutput(g, prev);
  return m;
}

TEST(OnnxImporter, LongOldOpsetChainsConvertOrAreRefusedAtOnce) {
  absl::StatusOr<Imported> r = Import(ReluChain(500, 9));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.converted_from_opset, 9);
  // libonnx's converter is quadratic in nodes: 10^5 would take most of an hour.
  r = Import(ReluChain(100000, 9));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Msg(r.status()), HasSubstr("the model has 100000 nodes"));
  // At a current opset there is no converter: a long chain imports.
  r = Import(ReluChain(100000, 17));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(OnnxImporter, MapInputsAndUndefinedNamesAreErrors) {
  {
    ModelProto m = NewModel();
    auto* in = m.mutable_graph()->add_input();
    in->set_name("map");
    in->mutable_type()->mutable_map_type()->set_key_type(TensorProto::INT64);
    in->mutable_type()->mutable_map_type()->mutable_value_type()->mutable_tensor_type()->set_elem_type(1);
    AddNode(m.mutable_graph(), "Identity", {"map"}, {"y"});
    AddOutput(m.mutable_graph(), "y");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("input 'map' is not a tensor, a sequence of tensors or an optional"));
  }
  {
    // A sequence of tensors is a value grove takes.
    ModelProto m = NewModel();
    auto* in = m.mutable_graph()->add_input();
    in->set_name("seq");
    auto* tt = in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
    tt->set_elem_type(TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    AddNode(m.mutable_graph(), "SequenceLength", {"seq"}, {"n"});
    AddOutput(m.mutable_graph(), "n");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->model->inputs().size(), 1u);
    EXPECT_EQ(r->model->inputs()[0].kind, ValueKind::kSequence);
    EXPECT_EQ(r->model->inputs()[0].dtype, DType::kF32);
    ASSERT_EQ(r->model->inputs()[0].shape.size(), 1u);
    EXPECT_EQ(r->model->inputs()[0].shape[0].value, 3);
  }
  {
    ModelProto m = ReluModel();
    m.mutable_graph()->mutable_node(0)->set_input(0, "nope");
    absl::StatusOr<Imported> r = Import(m);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Msg(r.status()), HasSubstr("node 'relu' (op Relu): reads 'nope', which no graph input"));
  }
}

TEST(OnnxImporter, MalformedBytesAreAnError) {
  absl::StatusOr<ModelProto> m = ParseOnnxModel("\x08\xff\xff\xff garbage", "bad.onnx");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(Msg(m.status()), HasSubstr("bad.onnx: not a valid ONNX model"));
  EXPECT_FALSE(ImportOnnxFile("/nonexistent/model.onnx", {}, nullptr).ok());
}

TEST(OnnxImporter, DamagedModelsFailCleanly) {
  // A model with a bit of everything, then every byte changed in turn: each
  // import must end in a model or a status, never a crash.
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "cond", TensorProto::BOOL, {});
  AddInput(g, "x", TensorProto::FLOAT, {"n", 2});
  *g->add_initializer() = FloatTensor("w", {2}, {1, 2});
  *g->add_initializer() = Int64Tensor("shape", {2}, {2, -1});
  AddNode(g, "Reshape", {"x", "shape"}, {"r"}, "reshape");
  NodeProto* node = AddNode(g, "If", {"cond"}, {"y"}, "branch");
  GraphProto* then_g = SetGraph(node, "then_branch");
  AddNode(then_g, "Add", {"x", "w"}, {"t"});
  AddOutput(then_g, "t");
  GraphProto* else_g = SetGraph(node, "else_branch");
  AddNode(else_g, "Mul", {"x", "w"}, {"t"});
  AddOutput(else_g, "t");
  AddOutput(g, "y");
  AddOutput(g, "r");
  const std::string bytes = m.SerializeAsString();
  ASSERT_TRUE(Import(m).ok());
  int imported = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(static_cast<unsigned char>(damaged[i]) ^ flip);
      absl::StatusOr<ModelProto> parsed = ParseOnnxModel(damaged, "damaged");
      if (!parsed.ok()) continue;
      if (ImportOnnxModel(*parsed, "", {}, nullptr).ok()) ++imported;
    }
  }
  for (size_t len = 0; len < bytes.size(); ++len) {
    absl::StatusOr<ModelProto> parsed = ParseOnnxModel(bytes.substr(0, len), "truncated");
    if (parsed.ok()) (void)ImportOnnxModel(*parsed, "", {}, nullptr);
  }
  EXPECT_GT(imported, 0);  // some flips only change values
}

// --- external data -------------------------------------------------------------

// A model whose weight "w" (f32[2]) lives in external data at `location`.
ModelProto ExternalModel(const std::string& location, int64_t offset = -1) {
  ModelProto m = NewModel();
  GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2});
  TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value(location);
  if (offset >= 0) {
    e = w->add_external_data();
    e->set_key("offset");
    e->set_value(absl::StrCat(offset));
    e = w->add_external_data();
    e->set_key("length");
    e->set_value("8");
  }
  AddNode(g, "Add", {"x", "w"}, {"y"}, "add");
  AddOutput(g, "y");
  return m;
}

absl::StatusOr<std::vector<float>> ImportAndRun(const std::string& path) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ImportOnnxFile(path, {}, nullptr);
  if (!bytes.ok()) return bytes.status();
  auto model = Model::LoadFromBuffer(*bytes);
  if (!model.ok()) return model.status();
  std::vector<float> x = {1, 2};
  auto session = CpuSession(*model);  // outputs are views into it
  auto out = session->Run({TensorView(DType::kF32, {2}, x.data())});
  if (!out.ok()) return out.status();
  return Values<float>((*out)[0]);
}

std::string FloatBytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(OnnxImporter, ExternalDataBesideTheModelIsRead) {
  const std::string dir = TempDir("beside");
  fs::create_directories(dir + "/weights");
  WriteFile(dir + "/weights/w.bin", "PADDING!" + FloatBytes({10, 20}));
  WriteFile(dir + "/model.onnx", ExternalModel("weights/w.bin", 8).SerializeAsString());
  absl::StatusOr<std::vector<float>> y = ImportAndRun(dir + "/model.onnx");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(11, 22));

  WriteFile(dir + "/whole.bin", FloatBytes({1, 1}));
  WriteFile(dir + "/whole.onnx", ExternalModel("whole.bin").SerializeAsString());
  y = ImportAndRun(dir + "/whole.onnx");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(2, 3));
}

// A FIFO (or any non-regular file) as the model or as external data is
// refused without blocking on it.
TEST(OnnxImporter, SpecialFilesAreRefusedWithoutBlocking) {
  const std::string dir = TempDir("fifo");
  ASSERT_EQ(::mkfifo((dir + "/w.bin").c_str(), 0600), 0);
  WriteFile(dir + "/model.onnx", ExternalModel("w.bin").SerializeAsString());
  absl::StatusOr<std::vector<float>> y = ImportAndRun(dir + "/model.onnx");
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(Msg(y.status()), HasSubstr("is not a regular file"));

  ASSERT_EQ(::mkfifo((dir + "/fifo.onnx").c_str(), 0600), 0);
  absl::StatusOr<std::vector<uint8_t>> bytes = ImportOnnxFile(dir + "/fifo.onnx", {}, nullptr);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(Msg(bytes.status()), HasSubstr("not a regular file"));
}

TEST(OnnxImporter, ExternalDataOutsideTheModelDirectoryIsRefused) {
  const std::string dir = TempDir("outside");
  const std::string outside = TempDir("outside_target");
  WriteFile(outside + "/x.bin", FloatBytes({1, 2}));
  fs::create_directories(dir + "/m");

  WriteFile(dir + "/m/dotdot.onnx", ExternalModel("../x.bin").SerializeAsString());
  absl::StatusOr<std::vector<float>> y = ImportAndRun(dir + "/m/dotdot.onnx");
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(Msg(y.status()), HasSubstr("has a '..' component"));

  WriteFile(dir + "/m/absolute.onnx", ExternalModel(outside + "/x.bin").SerializeAsString());
  y = ImportAndRun(dir + "/m/absolute.onnx");
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(Msg(y.status()), HasSubstr("is absolute"));

  // A symlink inside the directory that points out of it.
  fs::create_symlink(outside + "/x.bin", dir + "/m/link.bin");
  WriteFile(dir + "/m/link.onnx", ExternalModel("link.bin").SerializeAsString());
  y = ImportAndRun(dir + "/m/link.onnx");
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(Msg(y.status()), HasSubstr("outside the model's directory"));

  // Past the end of the file.
  WriteFile(dir + "/m/short.bin", FloatBytes({1}));
  WriteFile(dir + "/m/short.onnx", ExternalModel("short.bin").SerializeAsString());
  y = ImportAndRun(dir + "/m/short.onnx");
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(Msg(y.status()),
              HasSubstr("tensor 'w': needs 8 bytes of external data at offset 0 but 'short.bin' has only 4"));

  // A declared length that is not the tensor's size.
  WriteFile(dir + "/m/w.bin", FloatBytes({1, 2}));
  ModelProto wrong_length = ExternalModel("w.bin", 0);
  wrong_length.mutable_graph()->mutable_initializer(0)->mutable_external_data(2)->set_value("4");
  WriteFile(dir + "/m/wrong_length.onnx", wrong_length.SerializeAsString());
  y = ImportAndRun(dir + "/m/wrong_length.onnx");
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(Msg(y.status()), HasSubstr("external data length is 4 bytes but the tensor needs 8"));

  // Imported from memory there is no directory to resolve against.
  absl::StatusOr<std::vector<uint8_t>> bytes = ImportOnnxModel(ExternalModel("w.bin"), "", {}, nullptr);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(Msg(bytes.status()), HasSubstr("needs the model's directory"));
}

}  // namespace
}  // namespace grove::onnx_import
