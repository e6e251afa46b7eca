#include "vocabulary/task_options.h"

namespace tessera {

ResourceSet OneCpu() {
  ResourceSet one;
  one.Set("CPU", Quantity::FromInt(1));
  return one;
}

}  // namespace tessera
