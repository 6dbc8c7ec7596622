// RUN: ember-opt %s --pass-pipeline='builtin.module(func.func(convert-linalg-to-parallel-loops),ember-outline-parallel-loops)' | filecheck %s

// A big loop nest moves into a kernel that runs its thread's slice of dim 0; the
// subview it reads through is re-created inside (a bare pointer cannot carry it), the
// buffers are passed.
// CHECK-LABEL: func.func private @ember_par_0
// CHECK-SAME: (%{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: i32, %[[X:arg[0-9]+]]: memref<512x256xf32> {llvm.noalias}, %{{arg[0-9]+}}: memref<512xf32> {llvm.noalias})
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
// CHECK-SAME: (%{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: i32, %[[P:arg[0-9]+]]: memref<f32> {llvm.noalias}, %[[N:arg[0-9]+]]: index, %[[Q:arg[0-9]+]]: memref<f32> {llvm.noalias})
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

// -----
// Two loop nests equal but for their buffers (two identical layers): one kernel, both
// launches call it; a different loop gets a kernel of its own. A scalar argument of the
// entry (an i64 size from the call prologue) travels to the kernel like a size.
// CHECK-LABEL: func.func private @ember_par_2
// CHECK-SAME: (%{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: memref<1024x64xf32> {llvm.noalias}, %{{arg[0-9]+}}: memref<1024x64xf32> {llvm.noalias})
// CHECK: math.exp
// CHECK: func.func private @ember_par_2_launch(memref<1024x64xf32>, memref<1024x64xf32>)
// CHECK: func.func private @ember_par_3(%{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: i32, %{{arg[0-9]+}}: memref<f32> {llvm.noalias}, %[[K:arg[0-9]+]]: i64, %{{arg[0-9]+}}: memref<f32> {llvm.noalias})
// CHECK: arith.index_cast %[[K]] : i64 to index
// CHECK: math.tanh
// CHECK: func.func private @ember_par_3_launch(memref<f32>, i64, memref<f32>)
// CHECK-NOT: func.func private @ember_par_4
// CHECK-LABEL: func.func @layers
// CHECK: call @ember_par_2_launch(%arg0, %arg1)
// CHECK: call @ember_par_2_launch(%arg1, %arg2)
// CHECK: call @ember_par_3_launch
func.func @layers(%x: memref<1024x64xf32>, %y: memref<1024x64xf32>, %z: memref<1024x64xf32>,
                  %p: memref<f32>, %q: memref<f32>, %k: i64) {
  linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%x : memref<1024x64xf32>) outs(%y : memref<1024x64xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%y : memref<1024x64xf32>) outs(%z : memref<1024x64xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  }
  %n = arith.index_cast %k : i64 to index
  %vp = memref.reinterpret_cast %p to offset: [0], sizes: [%n, 256], strides: [256, 1] : memref<f32> to memref<?x256xf32>
  %vq = memref.reinterpret_cast %q to offset: [0], sizes: [%n, 256], strides: [256, 1] : memref<f32> to memref<?x256xf32>
  linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel", "parallel"]} ins(%vp : memref<?x256xf32>) outs(%vq : memref<?x256xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.tanh %i : f32
    linalg.yield %v : f32
  }
  return
}

// -----
// A leading dim of 1 (batch 1): the threads split dim 1, the first with 16+ iterations;
// dim 0 keeps its bounds.
// CHECK-LABEL: func.func private @ember_par_4
// CHECK: arith.divui
// CHECK: scf.parallel ({{.*}}) = (%c0, %{{[0-9]+}}, %c0) to (%c1, %{{[0-9]+}}, %c256)
// CHECK-LABEL: func.func @batch_of_one
// CHECK: call @ember_par_4_launch
#m3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @batch_of_one(%x: memref<1x128x256xf32>, %y: memref<1x128x256xf32>) {
  linalg.generic {indexing_maps = [#m3, #m3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : memref<1x128x256xf32>) outs(%y : memref<1x128x256xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  }
  return
}

// -----
// Two arguments that are one buffer (two views of one workspace slot), or a module
// whose outputs may live in its inputs' buffers (compiler/in_place_outputs.py): no
// `noalias`, which would let LLVM reorder a store and a load of the same memory.
// CHECK-LABEL: func.func private @ember_par_5
// CHECK-NOT: llvm.noalias
// CHECK-LABEL: func.func @one_slot_twice
#m2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @one_slot_twice(%ws: memref<262144xi8>, %out: memref<256x256xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.view %ws[%c0][] : memref<262144xi8> to memref<256x256xf32>
  %b = memref.view %ws[%c0][] : memref<262144xi8> to memref<256x256xf32>
  linalg.generic {indexing_maps = [#m2, #m2, #m2], iterator_types = ["parallel", "parallel"]} ins(%a, %out : memref<256x256xf32>, memref<256x256xf32>) outs(%b : memref<256x256xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %v = arith.addf %i, %j : f32
    linalg.yield %v : f32
  }
  return
}
