//! The tasks part of the configuration model: `[tasks]` (the bounds of every
//! task eragate runs) and `[[upstreams.tasks.tools]]` (which of an upstream's
//! tools answer a 2026-07-28 client with a task), with the checks types
//! cannot make. Applied by `crate::bridge::tasks`.

use std::time::Duration;

use serde::Deserialize;

use super::{ConfigIssue, Humantime};
use crate::policy::catalog::glob_matches;

/// `[tasks]`: the bounds of the tasks eragate runs for 2026-07-28 clients.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct TasksConfig {
    /// A task's `ttlMs`: it is answered for this long after its creation, then
    /// forgotten (a task still running then is cancelled). Default 1 h.
    pub(crate) ttl: Humantime,
    /// The `pollIntervalMs` clients are asked to keep. Default 500 ms.
    pub(crate) poll_interval: Humantime,
    /// How long a task waits for its client's input before it fails and its
    /// upstream call is cancelled (never past `ttl`). Default 10 min.
    pub(crate) input_timeout: Humantime,
    /// Most live tasks at once. Default 10,000.
    pub(crate) max_tasks: usize,
    /// ... of one principal. Default 100.
    pub(crate) max_tasks_per_principal: usize,
    /// Largest result a task keeps (its JSON text); a larger one fails the task.
    /// Default 1 MiB.
    pub(crate) max_result_bytes: usize,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            ttl: Humantime(Duration::from_secs(3600)),
            poll_interval: Humantime(Duration::from_millis(500)),
            input_timeout: Humantime(Duration::from_secs(600)),
            max_tasks: 10_000,
            max_tasks_per_principal: 100,
            max_result_bytes: 1024 * 1024,
        }
    }
}

impl TasksConfig {
    /// What types cannot check: bounds that let a task exist at all.
    pub(crate) fn issues(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut push = |key: &str, message: &str| {
            issues.push(ConfigIssue {
                path: format!("tasks.{key}"),
                message: message.into(),
            })
        };
        for (key, value) in [
            ("ttl", self.ttl.0),
            ("poll_interval", self.poll_interval.0),
            ("input_timeout", self.input_timeout.0),
        ] {
            if value.is_zero() {
                push(key, "must be greater than 0");
            }
        }
        if self.ttl.0 > Duration::from_secs(30 * 24 * 3600) {
            push("ttl", "must be at most 30 days");
        }
        for (key, value) in [
            ("max_tasks", self.max_tasks),
            ("max_tasks_per_principal", self.max_tasks_per_principal),
            ("max_result_bytes", self.max_result_bytes),
        ] {
            if value == 0 {
                push(key, "must be greater than 0");
            }
        }
        issues
    }

    /// How long a task may wait for input: `input_timeout`, never past `ttl`.
    pub(crate) fn input_wait(&self) -> Duration {
        self.input_timeout.0.min(self.ttl.0)
    }
}

/// `[upstreams.tasks]`: which of the upstream's tools run as tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpstreamTasks {
    /// `[[upstreams.tasks.tools]]`, the first match wins.
    #[serde(default)]
    pub(crate) tools: Vec<TaskTool>,
}

/// `[[upstreams.tasks.tools]]`: tools that support tasks.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskTool {
    /// A glob over the upstream's own tool names (`*`, `?`).
    pub(crate) name: String,
    /// Whether a client must declare the tasks extension to call them.
    #[serde(default)]
    pub(crate) support: TaskSupport,
    /// Where input asked before the task exists is gathered.
    #[serde(default)]
    pub(crate) input: TaskInput,
}

/// `upstreams.tasks.tools.support`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TaskSupport {
    /// A task for clients that declare the extension, a synchronous result for the rest.
    #[default]
    Optional,
    /// Only clients that declare the extension may call it (-32021 for the rest).
    Required,
}

/// `upstreams.tasks.tools.input`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TaskInput {
    /// The task is created at once; input is asked through `tasks/get` and
    /// answered with `tasks/update`.
    #[default]
    InTask,
    /// The call runs as an ordinary one (input through `input_required` on the
    /// `tools/call` itself) and becomes a task once that input is answered.
    BeforeTask,
}

impl UpstreamTasks {
    /// The rule for the upstream's tool `name`, if it supports tasks.
    pub(crate) fn rule_for(&self, name: &str) -> Option<&TaskTool> {
        self.tools.iter().find(|tool| glob_matches(&tool.name, name))
    }

    /// Whether any tool of the upstream supports tasks.
    pub(crate) fn any(&self) -> bool {
        !self.tools.is_empty()
    }

    /// What types cannot check, under `at` (`upstreams[i].tasks`).
    pub(crate) fn issues(&self, at: &str) -> Vec<ConfigIssue> {
        self.tools
            .iter()
            .enumerate()
            .filter(|(_, tool)| tool.name.trim().is_empty())
            .map(|(i, _)| ConfigIssue {
                path: format!("{at}.tools[{i}].name"),
                message: "must be a tool name or a glob such as \"build_*\"".into(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_rule_wins() {
        let tasks = UpstreamTasks {
            tools: vec![
                TaskTool {
                    name: "slow_*".into(),
                    support: TaskSupport::Required,
                    input: TaskInput::InTask,
                },
                TaskTool {
                    name: "*".into(),
                    support: TaskSupport::Optional,
                    input: TaskInput::BeforeTask,
                },
            ],
        };
        let cases = [
            ("slow_compute", Some(TaskSupport::Required)),
            ("greet", Some(TaskSupport::Optional)),
        ];
        for (name, support) in cases {
            assert_eq!(tasks.rule_for(name).map(|t| t.support), support, "{name}");
        }
        assert!(UpstreamTasks::default().rule_for("greet").is_none());
    }

    #[test]
    fn bounds_that_forbid_every_task_are_refused() {
        let config = TasksConfig {
            ttl: Humantime(Duration::ZERO),
            max_tasks_per_principal: 0,
            ..TasksConfig::default()
        };
        let paths: Vec<String> = config.issues().into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["tasks.ttl", "tasks.max_tasks_per_principal"]);
        assert!(TasksConfig::default().issues().is_empty());
        let input_longer_than_ttl = TasksConfig {
            ttl: Humantime(Duration::from_secs(60)),
            ..TasksConfig::default()
        };
        assert_eq!(input_longer_than_ttl.input_wait(), Duration::from_secs(60));
    }
}
