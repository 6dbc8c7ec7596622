// RUN: ember-opt %s --ember-emit-parallel-launchers | filecheck %s

// The declared launcher gets a body: pack the pointers, fork with GOMP_parallel; the
// trampoline unpacks them and passes its thread number and the team size.
// CHECK-DAG: llvm.func @GOMP_parallel(!llvm.ptr, !llvm.ptr, i32, i32)
// CHECK-DAG: llvm.func @omp_get_thread_num() -> i32
// CHECK-LABEL: llvm.func internal @ember_par_0_omp(%{{.*}}: !llvm.ptr)
// CHECK: llvm.load
// CHECK: llvm.load
// CHECK: %[[T:.*]] = llvm.call @omp_get_thread_num()
// CHECK: %[[N:.*]] = llvm.call @omp_get_num_threads()
// CHECK: llvm.call @ember_par_0(%[[T]], %[[N]], %{{.*}}, %{{.*}})
// CHECK-LABEL: llvm.func internal @ember_par_0_launch(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: llvm.store
// CHECK: llvm.store
// CHECK: %[[F:.*]] = llvm.mlir.addressof @ember_par_0_omp
// CHECK: llvm.call @GOMP_parallel(%[[F]]
llvm.func @ember_par_0(%tid: i32, %nt: i32, %a: !llvm.ptr, %b: !llvm.ptr) {
  llvm.return
}
llvm.func @ember_par_0_launch(!llvm.ptr, !llvm.ptr)
llvm.func @forward(%a: !llvm.ptr, %b: !llvm.ptr) {
  llvm.call @ember_par_0_launch(%a, %b) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}
