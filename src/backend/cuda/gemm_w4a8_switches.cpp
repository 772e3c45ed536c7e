#include "backend/cuda/gemm_w4a8_switches.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "core/error.h"

namespace qserve::cuda {
namespace {

struct Switch {
  const char* name;
  bool default_on;
  std::atomic<int> set{-1};  // -1: the environment's value; else 0 / 1
};

constexpr int kSwitches = 8;

std::array<Switch, kSwitches>& switches() {
  static std::array<Switch, kSwitches> s{{{"QSERVE_W4A8_UNSPLIT_TWINS", true},
                                  {"QSERVE_W4A8_CLUSTER_PAIR", true},
                                  {"QSERVE_W4A8_CLUSTER_PUSH", true},
                                  {"QSERVE_W4A8_PUSH_APART", true},
                                  {"QSERVE_W4A8_PUSH_ASYNC", true},
                                  {"QSERVE_W4A8_PUSH_FEWER_STAGES", true},
                                  {"QSERVE_W4A8_X_3D", false},
                                  {"QSERVE_W4A8_FIRST_STAGES", true}}};
  return s;
}

// The environment's value: default_on: on unless "0"; else off unless "1".
bool from_environment(const Switch& s) {
  const char* v = std::getenv(s.name);
  return s.default_on ? v == nullptr || std::string(v) != "0" : v != nullptr && std::string(v) == "1";
}

bool on(int index) {
  Switch& s = switches()[index];
  const int v = s.set.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  static const std::array<bool, kSwitches> env = [] {
    std::array<bool, kSwitches> e{};
    for (int i = 0; i < kSwitches; ++i) e[i] = from_environment(switches()[i]);
    return e;
  }();
  return env[index];
}

// The switch and value of "NAME=0|1"; throws for anything else.
std::pair<Switch*, int> parse(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  const std::string_view name = assignment.substr(0, eq);
  const std::string_view value = eq == assignment.npos ? std::string_view() : assignment.substr(eq + 1);
  for (Switch& s : switches())
    if (name == s.name) {
      if (value != "0" && value != "1")
        fail(ErrorCode::kInvalidArgument, "W4A8 switch '{}': the value must be 0 or 1", std::string(assignment));
      return {&s, value == "1" ? 1 : 0};
    }
  std::string names;
  for (const Switch& s : switches()) names += std::string(names.empty() ? "" : ", ") + s.name;
  fail(ErrorCode::kInvalidArgument, "W4A8 switch '{}': expected NAME=0 or NAME=1, NAME one of {}",
       std::string(assignment), names);
}

}  // namespace

void set_w4a8_switch(std::string_view assignment) {
  const auto [s, v] = parse(assignment);
  s->set.store(v, std::memory_order_relaxed);
}

void check_w4a8_switch(std::string_view assignment) { (void)parse(assignment); }

void reset_w4a8_switches() {
  for (Switch& s : switches()) s.set.store(-1, std::memory_order_relaxed);
}

namespace w4a8::wgmma {
bool unsplit_twins() { return on(0); }
bool cluster_pair() { return on(1); }
bool cluster_push() { return on(2); }
bool push_apart() { return on(3); }
bool push_async() { return on(4); }
bool push_fewer_stages() { return on(5); }
bool x_3d() { return on(6); }
bool first_stages() { return on(7); }
int first_stages_ahead(int kd) {
  static const int blocks_ahead = [] {  // -1: unset
    const char* e = std::getenv("QSERVE_W4A8_FIRST_BLOCKS_AHEAD");
    if (e == nullptr || *e == '\0') return -1;
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (*end != '\0' || n < 0 || n > 64)
      fail(ErrorCode::kInvalidArgument, "QSERVE_W4A8_FIRST_BLOCKS_AHEAD='{}': expected 0..64 (128-wide k blocks)", e);
    return static_cast<int>(n);
  }();
  if (blocks_ahead >= 0) return blocks_ahead > 0 ? std::max(1, blocks_ahead / kd) : 0;
  return first_stages() && kd > 1 ? kFirstStagesAhead : 0;
}
}  // namespace w4a8::wgmma

}  // namespace qserve::cuda
