// Package scheduling holds no code: its tests run the stage scheduler
// (processors/scheduler) inside the composed platform, end to end, with
// stages served over gRPC, the aggregate, the API and a broker process
// killed under them. The scheduler's own tests, without the platform, stay
// beside it.
package scheduling
