// RUN: llmc-opt %s --llmc-good --llmc-guest="x=1" | FileCheck %s
// RUN: llmc-opt %s --pass-pipeline="builtin.module(llmc-no-file{a=b},llmc-fuse)"
// A longer flag does not name llmc-no-test:
// RUN: llmc-opt %s --llmc-no-test-extra
// llmc-no-test outside a RUN line does not count either.
