# The Megatron-shaped reference workloads (tests/workloads, label "workloads").
add_subdirectory(workloads)
