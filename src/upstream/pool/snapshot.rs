//! The admin view of one upstream: its era, members with health and load,
//! partitions, and admission. Reads only; changes nothing.

use serde_json::{Value, json};

use super::Upstream;

impl Upstream {
    /// The admin view: era, members with health and load, partitions.
    pub(crate) fn snapshot(&self) -> Value {
        let partitions = self.partitions.all();
        let stats = self.stats.view();
        let mut per_member = vec![(0usize, 0usize); self.members.len()];
        for partition in &partitions {
            for pooled in partition.snapshot() {
                if let Some(entry) = per_member.get_mut(pooled.member)
                    && !pooled.session.is_closed()
                {
                    entry.0 += 1;
                    entry.1 += pooled.session.in_flight();
                }
            }
        }
        let members: Vec<Value> = self
            .members
            .iter()
            .zip(per_member)
            .map(|(m, (sessions, in_flight))| m.snapshot(sessions, in_flight))
            .collect();
        json!({
            "upstream": &*self.name,
            "path": self.config.path,
            "era": self.era_if_known().map(|e| format!("{e:?}").to_lowercase()),
            "members": members,
            "partitions": partitions.len(),
            "in_flight": self.admission.in_flight(),
            "queued": self.admission.queued(),
            "max_in_flight": self.config.max_in_flight,
            "admission_rejected": stats["admission_rejected"],
            "initialize_saved": stats["initialize_saved"],
            "list_cache_hits": stats["list_cache_hits"],
            "list_cache_misses": stats["list_cache_misses"],
            "read_cache_hits": stats["read_cache_hits"],
            "read_cache_misses": stats["read_cache_misses"],
            "last_success_ms": stats["last_success_ms"],
        })
    }
}
