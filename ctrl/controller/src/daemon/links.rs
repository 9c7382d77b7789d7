//! The state task's handling of a link report (`POST /api/v1/links`): it
//! applies it, unless an operator's link-down would partition the fabric
//! and was not forced, and says which leaf pairs lost their paths.

use serde_json::json;
use tracing::warn;

use super::State;
use crate::core::Input;
use crate::obs::{CommandError, ValueReply};
use crate::reach;

impl State {
    /// True when the link changed state (a decision is due).
    pub(super) fn on_set_link(&mut self, link: usize, up: bool, force: bool, reply: ValueReply) -> bool {
        let cut = if up { Vec::new() } else { self.core.would_cut(link) };
        let topo = self.core.topology();
        let name = topo.links.get(link).map(|l| topo.endpoint_name(l.a)).unwrap_or_default();
        if !cut.is_empty() && !force {
            let refused = CommandError::WouldPartition {
                link: name.clone(),
                pairs: cut.len(),
                which: reach::describe(topo, &cut),
            };
            let message = refused.to_string();
            let details = json!({"link": name, "cut_off": reach::pairs_json(topo, &cut)});
            self.obs.events.record("link_down_refused", None, &message, details);
            let _ = reply.send(Err(refused));
            return false;
        }
        let cut_off = reach::pairs_json(topo, &cut);
        if !cut.is_empty() {
            let names = reach::describe(topo, &cut);
            warn!(link = %name, pairs = cut.len(), cut_off = %names, "forced link-down partitions the fabric");
        }
        self.input(&if up { Input::LinkUp { link } } else { Input::LinkDown { link } });
        let answer = json!({"cut_off": cut_off, "unreachable_pairs": self.core.unreachable().len()});
        let _ = reply.send(Ok(answer));
        true
    }
}
