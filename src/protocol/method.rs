//! The method vocabulary of 2026-07-28, and what each method implies for
//! routing headers, caching and multi round-trip input.

/// The `params` member naming what a method acts on (the tool, prompt or resource), of
/// any revision: what per-name rules such as `[auth.oauth.scopes_for]` key on.
pub fn named_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// A request method a 2026-07-28 client may send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModernMethod {
    /// `server/discover`
    Discover,
    /// `tools/list`
    ToolsList,
    /// `tools/call`
    ToolsCall,
    /// `prompts/list`
    PromptsList,
    /// `prompts/get`
    PromptsGet,
    /// `resources/list`
    ResourcesList,
    /// `resources/templates/list`
    ResourceTemplatesList,
    /// `resources/read`
    ResourcesRead,
    /// `completion/complete`
    CompletionComplete,
    /// `subscriptions/listen`
    SubscriptionsListen,
    /// `tasks/get` (the tasks extension)
    TasksGet,
    /// `tasks/update` (the tasks extension)
    TasksUpdate,
    /// `tasks/cancel` (the tasks extension)
    TasksCancel,
}

/// How a method name looks to a 2026-07-28 endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MethodClass {
    /// Defined by 2026-07-28.
    Modern(ModernMethod),
    /// Existed in a handshake revision and was removed (`initialize`, `ping`, …).
    Removed,
    /// Never defined.
    Unknown,
}

impl ModernMethod {
    /// Every modern method.
    pub(crate) const ALL: [ModernMethod; 13] = [
        ModernMethod::Discover,
        ModernMethod::ToolsList,
        ModernMethod::ToolsCall,
        ModernMethod::PromptsList,
        ModernMethod::PromptsGet,
        ModernMethod::ResourcesList,
        ModernMethod::ResourceTemplatesList,
        ModernMethod::ResourcesRead,
        ModernMethod::CompletionComplete,
        ModernMethod::SubscriptionsListen,
        ModernMethod::TasksGet,
        ModernMethod::TasksUpdate,
        ModernMethod::TasksCancel,
    ];

    /// Classifies a method name.
    pub(crate) fn classify(name: &str) -> MethodClass {
        if let Some(method) = ModernMethod::ALL.iter().find(|m| m.as_str() == name) {
            return MethodClass::Modern(*method);
        }
        const REMOVED: [&str; 8] = [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
            "sampling/createMessage",
            "elicitation/create",
            "roots/list",
        ];
        if REMOVED.contains(&name) || name.starts_with("tasks/") {
            MethodClass::Removed
        } else {
            MethodClass::Unknown
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ModernMethod::Discover => "server/discover",
            ModernMethod::ToolsList => "tools/list",
            ModernMethod::ToolsCall => "tools/call",
            ModernMethod::PromptsList => "prompts/list",
            ModernMethod::PromptsGet => "prompts/get",
            ModernMethod::ResourcesList => "resources/list",
            ModernMethod::ResourceTemplatesList => "resources/templates/list",
            ModernMethod::ResourcesRead => "resources/read",
            ModernMethod::CompletionComplete => "completion/complete",
            ModernMethod::SubscriptionsListen => "subscriptions/listen",
            ModernMethod::TasksGet => "tasks/get",
            ModernMethod::TasksUpdate => "tasks/update",
            ModernMethod::TasksCancel => "tasks/cancel",
        }
    }

    /// The `params` member that `Mcp-Name` must mirror, for the methods that have one
    /// (the tasks extension's name their task).
    pub(crate) fn name_param(self) -> Option<&'static str> {
        match self {
            ModernMethod::ToolsCall | ModernMethod::PromptsGet => Some("name"),
            ModernMethod::ResourcesRead => Some("uri"),
            ModernMethod::TasksGet | ModernMethod::TasksUpdate | ModernMethod::TasksCancel => Some("taskId"),
            _ => None,
        }
    }

    /// Whether a complete result must carry `ttlMs` and `cacheScope`.
    pub(crate) fn is_cacheable(self) -> bool {
        matches!(
            self,
            ModernMethod::Discover
                | ModernMethod::ToolsList
                | ModernMethod::PromptsList
                | ModernMethod::ResourcesList
                | ModernMethod::ResourceTemplatesList
                | ModernMethod::ResourcesRead
        )
    }

    /// Whether the method is the tasks extension's, answered by eragate's own tasks.
    pub(crate) fn is_tasks(self) -> bool {
        matches!(
            self,
            ModernMethod::TasksGet | ModernMethod::TasksUpdate | ModernMethod::TasksCancel
        )
    }

    /// Whether the method may answer `input_required` (multi round-trip requests).
    pub(crate) fn allows_input_required(self) -> bool {
        matches!(
            self,
            ModernMethod::ToolsCall | ModernMethod::PromptsGet | ModernMethod::ResourcesRead
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        let cases = [
            ("server/discover", MethodClass::Modern(ModernMethod::Discover)),
            ("tools/call", MethodClass::Modern(ModernMethod::ToolsCall)),
            (
                "resources/templates/list",
                MethodClass::Modern(ModernMethod::ResourceTemplatesList),
            ),
            (
                "subscriptions/listen",
                MethodClass::Modern(ModernMethod::SubscriptionsListen),
            ),
            ("initialize", MethodClass::Removed),
            ("ping", MethodClass::Removed),
            ("logging/setLevel", MethodClass::Removed),
            ("resources/subscribe", MethodClass::Removed),
            ("tasks/result", MethodClass::Removed),
            ("tasks/list", MethodClass::Removed),
            ("tasks/get", MethodClass::Modern(ModernMethod::TasksGet)),
            ("widgets/list", MethodClass::Unknown),
            ("", MethodClass::Unknown),
        ];
        for (name, class) in cases {
            assert_eq!(ModernMethod::classify(name), class, "{name}");
        }
        for method in ModernMethod::ALL {
            assert_eq!(ModernMethod::classify(method.as_str()), MethodClass::Modern(method));
        }
    }

    #[test]
    fn the_six_cacheable_results() {
        let cacheable: Vec<_> = ModernMethod::ALL.iter().filter(|m| m.is_cacheable()).collect();
        assert_eq!(cacheable.len(), 6);
        assert!(!ModernMethod::ToolsCall.is_cacheable());
        assert!(!ModernMethod::CompletionComplete.is_cacheable());
    }
}
