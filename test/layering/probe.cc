// A layering probe (test/layering/CMakeLists.txt): compiled in one room's
// include context, it includes one header of another room, named by
// GROVE_PROBE_HEADER. It compiles exactly when that room may use the other.
#include GROVE_PROBE_HEADER
