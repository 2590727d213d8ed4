//===- MpiLaunch.cpp - recognising an MPI launch, in every build ----------===//
//
// These need no MPI library: a build without MPI still recognises mpirun's
// environment (to refuse it clearly) and words a world-size mismatch the
// same way.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <cstdlib>

namespace llmc {

bool launchedByMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(var))
      return true;
  return false;
}

std::string worldSizeMismatch(const Mesh &mesh, int launched, const std::string &variable) {
  int expected = 1;
  std::string layout;
  for (auto &axis : mesh) {
    expected *= axis.second;
    layout += (layout.empty() ? "" : ",") + axis.first + "=" + std::to_string(axis.second);
  }
  std::string text = "the artifact was compiled for " + std::to_string(expected) + " ranks (mesh " +
                     (layout.empty() ? "1" : layout) + ") but " + std::to_string(launched) +
                     " were launched";
  if (variable.empty())
    return text + "; run mpirun -np " + std::to_string(expected);
  return text + " (" + variable + "=" + std::to_string(launched) + "); start " +
         std::to_string(expected) + " ranks with " + variable + "=" + std::to_string(expected);
}

} // namespace llmc
