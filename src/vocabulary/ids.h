// The ids and names that travel through the layers, each its own type (base/strong_id.h): a
// JobId is never taken for an ActorId, nor a placement group's name for a slice group's, and none
// of them for a bare string. The protocol carries them as strings; they become these types where
// a message is read (wire/, or the reading code) and strings again where one is written. The
// command line and the Python binding make them from their text once.
//
//   tessera::PlacementGroupName group("train");
//   std::cout << group;          // "train" (operator<<); group.value() is the string
//   group == tessera::SliceGroupName("train");  // does not compile
//
// Thread-safe: values.
#pragma once

#include <string>

#include "base/strong_id.h"  // NodeId, DeviceIndex: with these, every id is one include away

namespace tessera {

// A job of the cluster: a gang (`tessera train`, tessera::StartGang: "job-1a2b3c4d") or a driver's
// run (`tessera run`, the head's job table).
using JobId = StrongId<struct JobIdTag, std::string>;
// An actor: the hex of the task that created it.
using ActorId = StrongId<struct ActorIdTag, std::string>;
// A placement group, by the name its creator gave it (unique among the head's reservations).
using PlacementGroupName = StrongId<struct PlacementGroupNameTag, std::string>;
// A slice group (a reservation of whole slices), by its name; tasks are placed in its bundles as
// in a placement group of the same name (PlacementGroupName(slice.value())).
using SliceGroupName = StrongId<struct SliceGroupNameTag, std::string>;

}  // namespace tessera
