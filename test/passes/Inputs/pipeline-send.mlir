// A send no stage receives, refused by --target cuda (place-streams.mlir).
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @train_step kind "train_step" {
    %a = exec.buffer offset 0 : memref<8xf32>
    exec.send %a axis "pp" shift 1 tag 0 : memref<8xf32>
  }
}
