// A tree that breaks each rule of pass_files.py (test/e2e/pass-files.test).
def Good : Pass<"llmc-good", "mlir::ModuleOp"> {}
def NoFile : Pass<"llmc-no-file", "mlir::ModuleOp"> {}
def NoTest : Pass<"llmc-no-test", "mlir::ModuleOp"> {}
def Guest : Pass<"llmc-guest", "mlir::ModuleOp"> {}
def Fuse : Pass<"llmc-fuse", "mlir::ModuleOp"> {
  let options = [
    Option<"fusions", "fusions", "std::string", "\"all\"",
           "all | none | comma-separated fusion names (alpha, "
           "beta)">,
  ];
}
