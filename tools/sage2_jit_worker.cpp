// sage2-jit-worker: compiles one kernel build for libsage2 in a process of its own (the quick
// compile tier: runtime/jit_worker.hpp says why). Not meant to be run by hand.
#include "runtime/jit_worker.hpp"

int main(int argc, char** argv) { return sage2::runtime::jit_worker_main(argc, argv); }
