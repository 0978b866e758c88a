// Stage one of the pipeline benchmark: x + x, [256, 256] f32. The module name is what
// pipeline.mlir imports (@scale.double).
module @scale {
  func.func @double(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
    %y = arith.addf %x, %x : tensor<256x256xf32>
    return %y : tensor<256x256xf32>
  }
}
