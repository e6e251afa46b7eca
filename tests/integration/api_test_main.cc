// The main of the C++ API's integration test binaries: each binary is the driver and, started by
// the node agents in worker mode, the workers (a worker runs tasks and never returns from Init).
#include <gtest/gtest.h>

#include "tessera/tessera.h"

int main(int argc, char** argv) {
  if (tessera::IsWorkerProcess()) (void)tessera::Init();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
