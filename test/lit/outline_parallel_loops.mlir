// RUN: ember-opt %s --pass-pipeline='builtin.module(func.func(convert-linalg-to-parallel-loops),ember-outline-parallel-loops)' | filecheck %s

// A big loop nest moves into a kernel that runs its thread's slice of dim 0; the
// subview it reads through is re-created inside (a bare pointer cannot carry it), the
// buffers are passed.
// CHECK-LABEL: func.func private @ember_par_0
// CHECK-SAME: (%{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: i32, %[[X:arg[0-9]+]]: memref<512x256xf32>, %{{arg[0-9]+}}: memref<512xf32>)
// CHECK: memref.subview %[[X]]
// CHECK: arith.divui
// CHECK: scf.parallel
// CHECK: scf.for
// CHECK: func.func private @ember_par_0_launch(memref<512x256xf32>, memref<512xf32>)

// CHECK-LABEL: func.func @big
// CHECK-NOT: scf.parallel
// CHECK: call @ember_par_0_launch(%arg0, %arg1)
#m = affine_map<(d0, d1) -> (d0, d1)>
#r = affine_map<(d0, d1) -> (d0)>
func.func @big(%x: memref<512x256xf32>, %s: memref<512xf32>) {
  %sub = memref.subview %x[0, 0] [512, 128] [1, 1] : memref<512x256xf32> to memref<512x128xf32, strided<[256, 1]>>
  linalg.generic {indexing_maps = [#m, #r], iterator_types = ["parallel", "reduction"]} ins(%sub : memref<512x128xf32, strided<[256, 1]>>) outs(%s : memref<512xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = arith.addf %i, %o : f32
    linalg.yield %v : f32
  }
  return
}

// Too little work for a fork/join: stays in place.
// CHECK-LABEL: func.func @small
// CHECK: scf.parallel
// CHECK-NOT: call
#e = affine_map<(d0) -> (d0)>
func.func @small(%x: memref<64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel"]} ins(%x : memref<64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  }
  return
}

// -----
// Dynamic shapes: the size argument is passed, the views of the bare pointers are
// re-created inside, and the slice of dim 0 comes from the run-time trip count.
// CHECK-LABEL: func.func private @ember_par_1
// CHECK-SAME: (%{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: i32, %[[P:arg[0-9]+]]: memref<f32>, %[[N:arg[0-9]+]]: index, %[[Q:arg[0-9]+]]: memref<f32>)
// CHECK: memref.reinterpret_cast %[[P]] to offset: [0], sizes: [%[[N]], 256]
// CHECK: arith.ceildivui
// CHECK: scf.parallel
// CHECK: func.func private @ember_par_1_launch(memref<f32>, index, memref<f32>)
// CHECK-LABEL: func.func @dynamic
// CHECK: call @ember_par_1_launch(%arg0, %arg2, %arg1)
func.func @dynamic(%x: memref<f32>, %y: memref<f32>, %n: index) {
  %vx = memref.reinterpret_cast %x to offset: [0], sizes: [%n, 256], strides: [256, 1] : memref<f32> to memref<?x256xf32>
  %vy = memref.reinterpret_cast %y to offset: [0], sizes: [%n, 256], strides: [256, 1] : memref<f32> to memref<?x256xf32>
  linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%vx : memref<?x256xf32>) outs(%vy : memref<?x256xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  }
  return
}
