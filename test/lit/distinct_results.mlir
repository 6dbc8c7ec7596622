// RUN: ember-opt %s --split-input-file --ember-distinct-results | filecheck %s
// RUN: ember-opt %s --split-input-file --ember-distinct-results --buffer-results-to-out-params=modify-public-functions=true | filecheck %s --check-prefix=OUT

// A buffer returned twice: the second result is a copy (buffer-results-to-out-params
// segfaults on the original).
// CHECK-LABEL: func.func @twice
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.copy %[[A]], %[[B]]
// CHECK-NEXT: return %[[A]], %[[B]]
// OUT-LABEL: func.func @twice(%arg0: memref<4xf32>, %arg1: memref<4xf32>, %arg2: memref<4xf32>)
// OUT: return{{$}}
func.func @twice(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %0 = memref.alloc() : memref<4xf32>
  memref.copy %a, %0 : memref<4xf32> to memref<4xf32>
  return %0, %0 : memref<4xf32>, memref<4xf32>
}

// -----

// A returned argument is copied too; a distinct computed buffer is left alone.
// CHECK-LABEL: func.func @argument
// CHECK: %[[D:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK: %[[C:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT: memref.copy %arg0, %[[C]]
// CHECK-NEXT: return %[[C]], %[[D]]
func.func @argument(%a: memref<2x3xf32>) -> (memref<2x3xf32>, memref<2x3xf32>) {
  %0 = memref.alloc() : memref<2x3xf32>
  memref.copy %a, %0 : memref<2x3xf32> to memref<2x3xf32>
  return %a, %0 : memref<2x3xf32>, memref<2x3xf32>
}

// -----

// Dynamic sizes (a dynamic-shape graph returning its input, e.g. a view that became
// the identity): the copy is allocated with the value's run-time sizes.
// CHECK-LABEL: func.func @dynamic_argument
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[N:.*]] = memref.dim %arg0, %[[C1]] : memref<2x?xf32>
// CHECK: %[[C:.*]] = memref.alloc(%[[N]]) : memref<2x?xf32>
// CHECK-NEXT: memref.copy %arg0, %[[C]]
// CHECK-NEXT: return %[[C]]
// OUT-LABEL: func.func @dynamic_argument(%arg0: memref<2x?xf32>, %arg1: memref<2x?xf32>)
func.func @dynamic_argument(%a: memref<2x?xf32>) -> memref<2x?xf32> {
  return %a : memref<2x?xf32>
}
