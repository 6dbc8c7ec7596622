// RUN: ember-opt %s --ember-read-only-arguments | filecheck %s
// RUN: ember-opt %s --ember-read-only-arguments "--one-shot-bufferize=bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | filecheck %s --check-prefix=BUF
// RUN: ember-opt %s "--one-shot-bufferize=bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | filecheck %s --check-prefix=UNMARKED

// torch.slice_scatter(x, s, 0, 2, 4): the insert is x's last use, so by default
// one-shot-bufferize writes s into the caller's x. Marked read-only, x is copied first.
// CHECK-LABEL: func.func @slice_scatter
// CHECK-SAME: (%{{.*}}: tensor<4x3xf32> {bufferization.writable = false}, %{{.*}}: tensor<2x3xf32> {bufferization.writable = false}, %{{.*}}: index)
// BUF-LABEL: func.func @slice_scatter
// BUF: %[[COPY:.*]] = memref.alloc
// BUF: memref.copy %arg0, %[[COPY]]
// BUF: %[[DST:.*]] = memref.subview %[[COPY]]
// BUF: memref.copy %arg1, %[[DST]]
// BUF: return %[[COPY]]
// UNMARKED-LABEL: func.func @slice_scatter
// UNMARKED-NOT: memref.alloc
// UNMARKED: %[[DST:.*]] = memref.subview %arg0
// UNMARKED: memref.copy %arg1, %[[DST]]
// UNMARKED: return %arg0
func.func @slice_scatter(%x: tensor<4x3xf32>, %s: tensor<2x3xf32>, %n: index) -> tensor<4x3xf32> {
  %0 = tensor.insert_slice %s into %x[2, 0] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// Private helpers are not the caller's entry: left alone.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT: writable
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
