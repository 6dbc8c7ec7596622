// RUN: ember-opt %s --split-input-file --ember-mark-parallel-loops | filecheck %s
// RUN: ember-opt %s --split-input-file --pass-pipeline='builtin.module(ember-mark-parallel-loops,convert-scf-to-cf,finalize-memref-to-llvm,convert-arith-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,ember-parallel-access-groups,reconcile-unrealized-casts)' | filecheck %s --check-prefix=LLVM

// An in-place update (AdamW's p.add_): the innermost dim of the parallel loop becomes an
// scf.for annotated as a parallel loop; every load and store joins its access group.
// CHECK-LABEL: func.func @in_place_update
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[I:.*]] =
// CHECK: scf.for %[[J:.*]] =
// CHECK: memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK: memref.store
// CHECK: } {ember.access_group = #[[G:.*]], llvm.loop_annotation = #{{.*}}}
// CHECK-NOT: llvm.loop_annotation
// LLVM: #[[GROUP:.*]] = #llvm.access_group<id = distinct[0]<>>
// LLVM: #[[LOOP:.*]] = #llvm.loop_annotation<parallelAccesses = #[[GROUP]]>
// LLVM-LABEL: llvm.func @in_place_update
// LLVM: llvm.load %{{.*}} {access_groups = [#[[GROUP]]]}
// LLVM: llvm.load %{{.*}} {access_groups = [#[[GROUP]]]}
// LLVM: llvm.store %{{.*}} {access_groups = [#[[GROUP]]]}
// LLVM: llvm.br ^{{.*}} {loop_annotation = #[[LOOP]]}
// LLVM-NOT: loop_annotation
// LLVM: llvm.return
func.func @in_place_update(%p: memref<64x256xf32>, %g: memref<64x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c256) step (%c1, %c1) {
    %x = memref.load %p[%i, %j] : memref<64x256xf32>
    %y = memref.load %g[%i, %j] : memref<64x256xf32>
    %z = arith.subf %x, %y : f32
    memref.store %z, %p[%i, %j] : memref<64x256xf32>
  }
  return
}

// -----

// A parallel loop around a reduction loop is not innermost: it stays as it is (only the
// innermost loop is vectorized, and a reduction is LLVM's to prove).
// CHECK-LABEL: func.func @row_sums
// CHECK: scf.parallel
// CHECK: scf.for
// CHECK-NOT: llvm.loop_annotation
// LLVM-LABEL: llvm.func @row_sums
// LLVM-NOT: access_groups
// LLVM-NOT: loop_annotation
// LLVM: llvm.return
func.func @row_sums(%x: memref<64x256xf32>, %y: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %j = %c0 to %c256 step %c1 {
      %a = memref.load %y[%i] : memref<64xf32>
      %b = memref.load %x[%i, %j] : memref<64x256xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %y[%i] : memref<64xf32>
    }
  }
  return
}
