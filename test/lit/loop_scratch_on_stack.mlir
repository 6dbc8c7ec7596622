// RUN: ember-opt %s --split-input-file --ember-loop-scratch-on-stack | filecheck %s

// A row buffer allocated and freed inside each iteration becomes one stack slot.
// CHECK-LABEL: func.func @row_scratch
// CHECK-NEXT: memref.alloca() {alignment = 64 : i64} : memref<1x128xf32>
// CHECK: scf.for
// CHECK-NOT: memref.alloc()
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @row_scratch(%x: memref<64x128xf32>, %y: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c1 {
    %t = memref.alloc() {alignment = 64 : i64} : memref<1x128xf32>
    %row = memref.subview %x[%i, 0] [1, 128] [1, 1] : memref<64x128xf32> to memref<1x128xf32, strided<[128, 1], offset: ?>>
    memref.copy %row, %t : memref<1x128xf32, strided<[128, 1], offset: ?>> to memref<1x128xf32>
    %out = memref.subview %y[%i, 0] [1, 128] [1, 1] : memref<64x128xf32> to memref<1x128xf32, strided<[128, 1], offset: ?>>
    memref.copy %t, %out : memref<1x128xf32> to memref<1x128xf32, strided<[128, 1], offset: ?>>
    memref.dealloc %t : memref<1x128xf32>
  }
  return
}

// -----

// Too big for the stack (1 MiB), or leaving the iteration (yielded): stays on the heap.
// CHECK-LABEL: func.func @big_or_escaping
// CHECK-NOT: memref.alloca
// CHECK: memref.alloc() : memref<512x512xf32>
// CHECK: memref.alloc() : memref<4xf32>
// CHECK: return
func.func @big_or_escaping(%init: memref<4xf32>) -> memref<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %f = arith.constant 1.0 : f32
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %init) -> memref<4xf32> {
    %big = memref.alloc() : memref<512x512xf32>
    memref.store %f, %big[%c0, %c0] : memref<512x512xf32>
    memref.dealloc %big : memref<512x512xf32>
    %next = memref.alloc() : memref<4xf32>
    memref.copy %acc, %next : memref<4xf32> to memref<4xf32>
    scf.yield %next : memref<4xf32>
  }
  return %r : memref<4xf32>
}
