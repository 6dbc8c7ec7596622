// RUN: ember-opt %s --ember-gpu-block-reductions | filecheck %s

#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>

// A row sum: one block per row, 128 threads striding over the row, partials combined
// in shared memory by a tree with a barrier after each step.
// CHECK-LABEL: func.func @row_sum
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c6, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c128{{.*}}, {{.*}}) workgroup(%[[SMEM:.*]] : memref<128xf32, #gpu.address_space<workgroup>>)
// CHECK: scf.if
// CHECK: memref.load %arg0[%[[ROW]], %[[T]]]
// CHECK: %[[FIRST:.*]] = math.exp
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]])
// CHECK: arith.addf %[[ACC]]
// CHECK: memref.store {{.*}}, %[[SMEM]][%[[T]]]
// CHECK: gpu.barrier
// CHECK: arith.constant 64 : index
// CHECK: memref.load %[[SMEM]]
// CHECK: gpu.barrier
// CHECK: arith.constant 1 : index
// CHECK: gpu.barrier
// CHECK: %[[TOTAL:.*]] = memref.load %[[SMEM]][%{{.*}}]
// CHECK: %[[OLD:.*]] = memref.load %arg1[%[[ROW]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[TOTAL]], %[[OLD]]
// CHECK: memref.store %[[NEW]], %arg1[%[[ROW]]]
// CHECK: gpu.terminator
func.func @row_sum(%a: memref<6x300xf32>, %o: memref<6xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<6x300xf32>) outs(%o : memref<6xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %e = math.exp %x : f32
    %s = arith.addf %e, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// A short reduction (16 < 64) keeps one thread per output element.
// CHECK-LABEL: func.func @short_max
// CHECK: linalg.generic
// CHECK-NOT: gpu.launch
func.func @short_max(%a: memref<6x16xf32>, %o: memref<6xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<6x16xf32>) outs(%o : memref<6xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %x, %acc : f32
    linalg.yield %m : f32
  }
  return
}
