// No @forward to train.
func.func @main() {
  return
}
