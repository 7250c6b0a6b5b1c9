//! Running eragate: the command line, reload, replicas, the status page, metrics and traces.

mod cli;
mod reload;
mod replicas;
mod shared_redis;
mod status_page;
mod telemetry;
mod traces;
