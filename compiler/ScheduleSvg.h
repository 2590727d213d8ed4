//===- ScheduleSvg.h - a pipeline schedule as a picture ---------*- C++ -*-===//
#ifndef LLMC_COMPILER_SCHEDULESVG_H
#define LLMC_COMPILER_SCHEDULESVG_H

#include <map>
#include <ostream>
#include <string>

namespace llmc {

/// Draws the pipeline schedule recorded in an artifact's metadata
/// (`pipeline.*`) as SVG: one row per stage, time left to right (the
/// compiler's unit-cost simulation: a chunk's forward 1, backward 2, or B
/// and W 1 each for zero-bubble), forwards, backwards and weight gradients
/// in their own colours, idle time as gaps. False with `error` set when
/// the artifact has no pipeline.
bool renderScheduleSvg(const std::map<std::string, std::string> &metadata, std::ostream &os,
                       std::string &error);

} // namespace llmc

#endif
