// RUN: ember-opt %s --split-input-file --ember-concat-slices-to-gather | filecheck %s
// im2col's stack of shifted slices: one gather loop nest instead of one copy per slice.

// Offsets that differ per piece come from a table indexed by the piece number; strides
// of a slice of a slice compose (2 * 1); the result is the collapsed (pieces, N) dim.
// CHECK-LABEL: func.func @shifted_slices
// CHECK-NOT: tensor.concat
// CHECK: %[[TABLE:.*]] = arith.constant dense<[0, 1, 2]> : tensor<3xindex>
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3x2x5xf32>)
// CHECK: %[[P:.*]] = linalg.index 1 : index
// CHECK: %[[N:.*]] = linalg.index 0 : index
// CHECK: %[[C:.*]] = linalg.index 2 : index
// CHECK: %[[W:.*]] = linalg.index 3 : index
// CHECK: %[[W2:.*]] = arith.muli %[[W]], %{{.*}} : index
// CHECK: %[[OFF:.*]] = tensor.extract %[[TABLE]][%[[P]]] : tensor<3xindex>
// CHECK: %[[COL:.*]] = arith.addi %[[OFF]], %[[W2]] : index
// CHECK: %[[V:.*]] = tensor.extract %arg0[%[[N]], %[[C]], %[[COL]]] : tensor<4x2x12xf32>
// CHECK: linalg.yield %[[V]] : f32
// CHECK: tensor.collapse_shape %[[G]] {{\[\[}}0], [1, 2], [3]] : tensor<4x3x2x5xf32> into tensor<4x6x5xf32>
func.func @shifted_slices(%x: tensor<4x2x12xf32>) -> tensor<4x6x5xf32> {
  %w = tensor.extract_slice %x[0, 0, 0] [4, 2, 12] [1, 1, 1] : tensor<4x2x12xf32> to tensor<4x2x12xf32>
  %a = tensor.extract_slice %w[0, 0, 0] [4, 2, 5] [1, 1, 2] : tensor<4x2x12xf32> to tensor<4x2x5xf32>
  %b = tensor.extract_slice %w[0, 0, 1] [4, 2, 5] [1, 1, 2] : tensor<4x2x12xf32> to tensor<4x2x5xf32>
  %c = tensor.extract_slice %x[0, 0, 2] [4, 2, 5] [1, 1, 2] : tensor<4x2x12xf32> to tensor<4x2x5xf32>
  %r = tensor.concat dim(1) %a, %b, %c : (tensor<4x2x5xf32>, tensor<4x2x5xf32>, tensor<4x2x5xf32>) -> tensor<4x6x5xf32>
  return %r : tensor<4x6x5xf32>
}

// -----

// Run-time sizes that are one SSA value in every piece: one loop nest.
// CHECK-LABEL: func.func @dynamic_pieces
// CHECK-NOT: cf.assert
// CHECK: linalg.generic
// CHECK: tensor.collapse_shape
// CHECK-NOT: tensor.concat
func.func @dynamic_pieces(%x: tensor<?x8xf32>, %n: index) -> tensor<?x4xf32> {
  %a = tensor.extract_slice %x[0, 0] [%n, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %b = tensor.extract_slice %x[1, 0] [%n, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %r = tensor.concat dim(0) %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// Run-time sizes that may differ (roll's x[s-k:] and x[:s-k]): the concat stays.
// CHECK-LABEL: func.func @unequal_dynamic_pieces
// CHECK-NOT: linalg.generic
// CHECK: tensor.concat
func.func @unequal_dynamic_pieces(%x: tensor<?x8xf32>, %n: index, %m: index) -> tensor<?x4xf32> {
  %a = tensor.extract_slice %x[0, 0] [%n, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %b = tensor.extract_slice %x[1, 0] [%m, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %r = tensor.concat dim(0) %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// Slices of two different tensors: left alone.
// CHECK-LABEL: func.func @two_sources
// CHECK: tensor.concat
func.func @two_sources(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<8x2xf32> {
  %a = tensor.extract_slice %x[0, 0] [4, 2] [1, 1] : tensor<4x8xf32> to tensor<4x2xf32>
  %b = tensor.extract_slice %y[0, 0] [4, 2] [1, 1] : tensor<4x8xf32> to tensor<4x2xf32>
  %r = tensor.concat dim(0) %a, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  return %r : tensor<8x2xf32>
}
