// The W4A8 kernel-form switches: which form a plan runs where its tile has
// more than one, kept so that a new form can be measured against the old one
// before it becomes the default (docs/gemm-hopper.md).
//
//   QSERVE_W4A8_UNSPLIT_TWINS  (default 1)  a cluster plan of one split runs its
//                                          persistent twin
//   QSERVE_W4A8_CLUSTER_PAIR   (default 1)  split-2 cluster plans run the pair form
//   QSERVE_W4A8_CLUSTER_PUSH   (default 1)  split-3 / 4 / 6 cluster plans run the
//                                          push forms
//   QSERVE_W4A8_PUSH_APART     (default 1)  a push form (the pair included) whose
//                                          received parts fit beside the stages
//                                          takes them apart, with one cluster
//                                          barrier fewer (push_recv_apart)
//   QSERVE_W4A8_PUSH_ASYNC     (default 1)  the push forms send their parts by
//                                          st.async onto the owner's mbarrier,
//                                          without the release barrier (and its
//                                          MEMBAR.ALL.GPU) that published them
//                                          (docs/gemm-hopper.md, "The parts by
//                                          st.async"; the default since round 39)
//   QSERVE_W4A8_PUSH_FEWER_STAGES (default 1) a push form of 3 or more
//                                          splits whose parts do not fit beside
//                                          the stages runs with one stage
//                                          fewer, the parts apart
//                                          (has_push_fewer_form; the default
//                                          since round 40)
//   QSERVE_W4A8_X_3D           (default 0)  the deep-stage tiles take a stage's
//                                          activation blocks in one 3-D box
//                                          (k % 128 == 0), not one per block
//                                          (round 41; no effect in round
//                                          42's A B B A on an H100)
//   QSERVE_W4A8_FIRST_STAGES   (default 1)  the deep-stage (kd > 1) register-A
//                                          W4 tiles request the weights of
//                                          their first 4 stages at the start,
//                                          the rest once stage 0 is complete
//                                          (round 41; kd > 1 only and the
//                                          default since round 42's A B B A)
//
// Each starts from its environment variable ("0" or "1"; read on first use)
// and can be set at run time for an A/B on one loaded model (qserve bench
// throughput --ab-switch). Set only while no W4A8 GEMM is being launched or
// captured: captured CUDA graphs keep the forms they captured.
#pragma once

#include <string_view>

namespace qserve::cuda {

// "NAME=0" or "NAME=1", NAME one of the switches above: sets it. Anything else
// throws qserve::Error (kInvalidArgument) and changes nothing.
void set_w4a8_switch(std::string_view assignment);
// The same errors as set_w4a8_switch, nothing set.
void check_w4a8_switch(std::string_view assignment);
// Every switch back to its environment's value.
void reset_w4a8_switches();

}  // namespace qserve::cuda
