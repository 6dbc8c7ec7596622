// RUN: ember-opt %s --ember-stable-sort | filecheck %s

// CHECK-LABEL: func.func @forward
// CHECK-NOT: torch.operator
// CHECK: torch.aten.sort %arg0, %int1, %true_0 : !torch.vtensor<[3,4],f32>, !torch.int, !torch.bool -> !torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],si64>
func.func @forward(%arg0: !torch.vtensor<[3,4],f32>) -> (!torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],si64>) {
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %true_0 = torch.constant.bool true
  %0:2 = torch.operator "torch.aten.sort.stable"(%arg0, %true, %int1, %true_0) : (!torch.vtensor<[3,4],f32>, !torch.bool, !torch.int, !torch.bool) -> (!torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],si64>)
  return %0#0, %0#1 : !torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],si64>
}
