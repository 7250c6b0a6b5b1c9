//! Upstream processes and endpoints: pools, restarts, and principals protected from hostile
//! or crashing upstreams.

mod children;
mod hostile_upstreams;
mod pools;
