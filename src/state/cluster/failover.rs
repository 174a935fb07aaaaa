//! Failover, as Redis 7.0's `cluster.c`: a replica of a failed master asks the masters for
//! their votes (FAILOVER_AUTH_REQUEST) after a delay ranked by replication offset, a master
//! grants one vote per epoch (FAILOVER_AUTH_ACK), the winner takes its master's slots with
//! a new config epoch and announces them; manual failover (CLUSTER FAILOVER) pauses the
//! master's writes until the replica has caught up; an orphaned master gets a replica from
//! the master with the most (replica migration).

use super::{todo, ClusterState, SLOTS};
use crate::protocol::cluster_bus::{
    self as wire, mflag0, msg_type as ty, node_flag as nf, Body, Header, Message, NodeName,
};
use crate::state::redis_log::Level;

/// Milliseconds a manual failover may take (Redis's CLUSTER_MF_TIMEOUT), and the master's
/// write pause, twice that.
pub const MF_TIMEOUT: i64 = 5000;
const MF_PAUSE_MULT: i64 = 2;
const REPLICA_MIGRATION_DELAY: i64 = 5000;
const CANT_FAILOVER_RELOG_PERIOD: i64 = 5 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum CantFailover {
    #[default]
    None,
    DataAge,
    WaitingDelay,
    Expired,
    WaitingVotes,
}

/// Election and manual-failover state (the `failover_auth_*` and `mf_*` fields of Redis's
/// `clusterState`).
#[derive(Debug)]
pub struct Failover {
    pub auth_time: i64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub auth_rank: usize,
    pub auth_epoch: u64,
    cant_reason: CantFailover,
    cant_logged_at: i64,
    /// Manual failover: its deadline (0: none in progress).
    pub mf_end: i64,
    /// Master side: the replica doing it.
    pub mf_replica: Option<NodeName>,
    /// Replica side: the master's offset once it paused (-1: not known yet), and whether
    /// the election may start.
    pub mf_master_offset: i64,
    pub mf_can_start: bool,
    /// This master paused its writes for a manual failover.
    paused: bool,
}

impl Default for Failover {
    fn default() -> Failover {
        Failover {
            auth_time: 0,
            auth_count: 0,
            auth_sent: false,
            auth_rank: 0,
            auth_epoch: 0,
            cant_reason: CantFailover::None,
            cant_logged_at: 0,
            mf_end: 0,
            mf_replica: None,
            mf_master_offset: -1,
            mf_can_start: false,
            paused: false,
        }
    }
}

fn jitter(now: i64, salt: u64) -> i64 {
    let mut z = (now as u64) ^ salt.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % 500) as i64
}

impl ClusterState {
    fn empty_message(&self, t: u16) -> Message {
        Message {
            header: self.header_for(t),
            body: Body::Empty,
        }
    }

    /// Redis's `resetManualFailover`.
    pub fn reset_manual_failover(&mut self) {
        if self.failover.paused {
            crate::state::pause::unpause(crate::state::pause::Purpose::Failover);
            self.failover.paused = false;
        }
        self.failover.mf_end = 0;
        self.failover.mf_can_start = false;
        self.failover.mf_replica = None;
        self.failover.mf_master_offset = -1;
    }

    /// The number of this replica's siblings with a greater offset (Redis's
    /// `clusterGetSlaveRank`): the election waits a second for each.
    fn replica_rank(&self) -> usize {
        let Some(master) = self.my_master().and_then(|m| self.nodes.get(&m)) else {
            return 0;
        };
        let mine = self.my_repl_offset;
        master
            .replicas
            .iter()
            .filter(|r| **r != self.myself)
            .filter_map(|r| self.nodes.get(r))
            .filter(|r| r.flags & nf::NOFAILOVER == 0 && r.repl_offset > mine)
            .count()
    }

    fn log_cant_failover(&mut self, reason: CantFailover, now: i64) {
        if reason == self.failover.cant_reason
            && now - self.failover.cant_logged_at < CANT_FAILOVER_RELOG_PERIOD
        {
            return;
        }
        self.failover.cant_reason = reason;
        let quiet = self.settings.node_timeout + 5000;
        if let Some(m) = self.my_master().and_then(|m| self.nodes.get(&m)) {
            if m.failed() && now - m.fail_time < quiet {
                return;
            }
        }
        let msg = match reason {
            CantFailover::DataAge => "Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.",
            CantFailover::WaitingDelay => "Waiting the delay before I can start a new failover.",
            CantFailover::Expired => "Failover attempt expired.",
            CantFailover::WaitingVotes => "Waiting for votes, but majority still not reached.",
            CantFailover::None => "Unknown reason code.",
        };
        self.failover.cant_logged_at = now;
        self.log(
            Level::Warning,
            format!("Currently unable to failover: {msg}"),
        );
    }

    /// Milliseconds since this replica last heard from its master (Redis's `data_age`):
    /// from the last byte of the stream, the link up or not. (Redis counts a lost link from
    /// its cached clock, which a long command leaves behind: a link killed in the same
    /// transaction as a DEBUG SLEEP ages from before the sleep, as here.)
    fn data_age(&self, now: i64) -> i64 {
        use std::sync::atomic::Ordering::Relaxed;
        let r = crate::state::replication::repl();
        let since = r.last_io_ms.load(Relaxed);
        if since == 0 {
            return i64::MAX / 4;
        }
        (now - since as i64).max(0)
    }

    /// Redis's `clusterHandleSlaveFailover`, from the cron and as votes arrive.
    pub fn handle_replica_failover(&mut self, now: i64) {
        let auth_age = now - self.failover.auth_time;
        let quorum = self.size / 2 + 1;
        let manual = self.failover.mf_end != 0 && self.failover.mf_can_start;
        let auth_timeout = (self.settings.node_timeout * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        let master = self.my_master().and_then(|m| self.nodes.get(&m));
        let eligible = match master {
            Some(m) if !self.myself_is_master() => {
                (manual || m.failed() && !self.settings.replica_no_failover) && m.numslots > 0
            }
            _ => false,
        };
        if !eligible {
            self.failover.cant_reason = CantFailover::None;
            return;
        }
        let mut data_age = self.data_age(now);
        if data_age > self.settings.node_timeout {
            data_age -= self.settings.node_timeout;
        }
        let factor = self.settings.replica_validity_factor;
        if factor > 0
            && data_age > self.settings.repl_ping_period_ms + self.settings.node_timeout * factor
            && !manual
        {
            self.log_cant_failover(CantFailover::DataAge, now);
            return;
        }
        if auth_age > auth_retry {
            self.failover.auth_time = now + 500 + jitter(now, self.myself[0] as u64);
            self.failover.auth_count = 0;
            self.failover.auth_sent = false;
            self.failover.auth_rank = self.replica_rank();
            self.failover.auth_time += self.failover.auth_rank as i64 * 1000;
            if self.failover.mf_end != 0 {
                self.failover.auth_time = now;
                self.failover.auth_rank = 0;
            }
            let delay = self.failover.auth_time - now;
            let (rank, offset) = (self.failover.auth_rank, self.my_repl_offset);
            self.log(
                Level::Warning,
                format!(
                    "Start of election delayed for {delay} milliseconds (rank #{rank}, offset {offset})."
                ),
            );
            self.broadcast_pong_to_local_replicas(now);
            return;
        }
        if !self.failover.auth_sent && self.failover.mf_end == 0 {
            let newrank = self.replica_rank();
            if newrank > self.failover.auth_rank {
                let added = (newrank - self.failover.auth_rank) as i64 * 1000;
                self.failover.auth_time += added;
                self.failover.auth_rank = newrank;
                self.log(
                    Level::Warning,
                    format!(
                        "Replica rank updated to #{newrank}, added {added} milliseconds of delay."
                    ),
                );
            }
        }
        if now < self.failover.auth_time {
            self.log_cant_failover(CantFailover::WaitingDelay, now);
            return;
        }
        if auth_age > auth_timeout {
            self.log_cant_failover(CantFailover::Expired, now);
            return;
        }
        if !self.failover.auth_sent {
            self.current_epoch += 1;
            self.failover.auth_epoch = self.current_epoch;
            let e = self.current_epoch;
            self.log(
                Level::Warning,
                format!("Starting a failover election for epoch {e}."),
            );
            let mut msg = self.empty_message(ty::FAILOVER_AUTH_REQUEST);
            if self.failover.mf_end != 0 {
                msg.header.mflags[0] |= mflag0::FORCEACK;
            }
            self.broadcast_message(&msg);
            self.failover.auth_sent = true;
            self.todo(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
            return;
        }
        if self.failover.auth_count >= quorum {
            self.log(
                Level::Warning,
                "Failover election won: I'm the new master.".into(),
            );
            let e = self.failover.auth_epoch;
            if self.me().is_some_and(|m| m.config_epoch < e) {
                if let Some(m) = self.me_mut() {
                    m.config_epoch = e;
                }
                self.log(
                    Level::Warning,
                    format!("configEpoch set to {e} after successful failover"),
                );
            }
            self.replace_my_master(now);
        } else {
            self.log_cant_failover(CantFailover::WaitingVotes, now);
        }
    }

    /// Redis's `clusterFailoverReplaceYourMaster`: this replica becomes the master of its
    /// master's slots.
    pub fn replace_my_master(&mut self, now: i64) {
        let me = self.myself;
        let Some(old) = self.my_master() else {
            return;
        };
        if self.myself_is_master() {
            return;
        }
        self.set_node_as_master(me);
        self.fx.promote = true;
        self.fx.replicate_to = None;
        for slot in 0..SLOTS as u16 {
            if self.nodes.get(&old).is_some_and(|o| o.has_slot(slot)) {
                self.del_slot(slot);
                self.add_slot(me, slot);
            }
        }
        self.update_state();
        if let Err(e) = super::nodes_conf::save(self, true) {
            self.log(
                Level::Warning,
                format!("Fatal: can't update cluster config file: {e}"),
            );
        }
        self.broadcast_pong(now);
        self.reset_manual_failover();
    }

    /// A master's answer to FAILOVER_AUTH_REQUEST (Redis's `clusterSendFailoverAuthIfNeeded`).
    pub fn vote_if_needed(&mut self, sender: NodeName, req: &Header, now: i64) {
        if !self.myself_is_master() || self.me().is_none_or(|m| m.numslots == 0) {
            return;
        }
        let name = wire::name_str(&sender).to_string();
        if req.current_epoch < self.current_epoch {
            let cur = self.current_epoch;
            self.log(
                Level::Warning,
                format!(
                    "Failover auth denied to {name}: reqEpoch ({}) < curEpoch({cur})",
                    req.current_epoch
                ),
            );
            return;
        }
        if self.last_vote_epoch == self.current_epoch {
            let cur = self.current_epoch;
            self.log(
                Level::Warning,
                format!("Failover auth denied to {name}: already voted for epoch {cur}"),
            );
            return;
        }
        let force_ack = req.mflags[0] & mflag0::FORCEACK != 0;
        let Some(node) = self.nodes.get(&sender) else {
            return;
        };
        let master = node.slaveof.and_then(|m| self.nodes.get(&m));
        let why = if node.is_master() {
            Some("it is a master node")
        } else if master.is_none() {
            Some("I don't know its master")
        } else if master.is_some_and(|m| !m.failed()) && !force_ack {
            Some("its master is up")
        } else {
            None
        };
        if let Some(why) = why {
            self.log(
                Level::Warning,
                format!("Failover auth denied to {name}: {why}"),
            );
            return;
        }
        let Some(master) = master else { return };
        let master_name = master.name;
        let since = now - master.voted_time;
        if since < self.settings.node_timeout * 2 {
            let wait = self.settings.node_timeout * 2 - since;
            self.log(
                Level::Warning,
                format!(
                    "Failover auth denied to {name}: can't vote about this master before {wait} milliseconds"
                ),
            );
            return;
        }
        for slot in 0..SLOTS as u16 {
            if !wire::slot_bit(&req.myslots, slot) {
                continue;
            }
            let Some(owner) = self.slots[slot as usize].and_then(|o| self.nodes.get(&o)) else {
                continue;
            };
            if self.slot_is_unclaimed(slot) || owner.config_epoch <= req.config_epoch {
                continue;
            }
            let oe = owner.config_epoch;
            self.log(
                Level::Warning,
                format!(
                    "Failover auth denied to {name}: slot {slot} epoch ({oe}) > reqEpoch ({})",
                    req.config_epoch
                ),
            );
            return;
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(m) = self.nodes.get_mut(&master_name) {
            m.voted_time = now;
        }
        self.todo(todo::SAVE_CONFIG | todo::FSYNC_CONFIG);
        if let Some(link) = self.nodes.get(&sender).and_then(|n| n.link) {
            let msg = self.empty_message(ty::FAILOVER_AUTH_ACK);
            self.send_message(link, &msg);
        }
        let cur = self.current_epoch;
        self.log(
            Level::Warning,
            format!("Failover auth granted to {name} for epoch {cur}"),
        );
    }

    /// A vote arrived (FAILOVER_AUTH_ACK).
    pub fn vote_received(&mut self, sender: NodeName, sender_current_epoch: u64, now: i64) {
        let counts = self
            .nodes
            .get(&sender)
            .is_some_and(|n| n.is_master() && n.numslots > 0);
        if counts && sender_current_epoch >= self.failover.auth_epoch {
            self.failover.auth_count += 1;
            self.handle_replica_failover(now);
        }
    }

    /// MFSTART from one of this master's replicas: writes pause while it catches up.
    pub fn manual_failover_requested(&mut self, sender: NodeName, link: u64, now: i64) {
        let mine = self
            .nodes
            .get(&sender)
            .is_some_and(|n| n.slaveof == Some(self.myself));
        if !mine {
            return;
        }
        self.reset_manual_failover();
        self.failover.mf_end = now + MF_TIMEOUT;
        self.failover.mf_replica = Some(sender);
        let until = std::time::Instant::now()
            + std::time::Duration::from_millis((MF_TIMEOUT * MF_PAUSE_MULT) as u64);
        crate::state::pause::pause(
            crate::state::pause::Purpose::Failover,
            crate::state::pause::WRITE,
            Some(until),
        );
        self.failover.paused = true;
        self.log(
            Level::Warning,
            format!(
                "Manual failover requested by replica {}.",
                wire::name_str(&sender)
            ),
        );
        // The replica learns the offset to reach from this PING (its PAUSED flag).
        self.send_ping(link, ty::PING, now);
    }

    /// The replica side of a manual failover: the paused master's offset is known once a
    /// message with the PAUSED flag arrives.
    pub fn master_offset_seen(&mut self, sender: NodeName, h: &Header) {
        if self.failover.mf_end != 0
            && !self.myself_is_master()
            && self.my_master() == Some(sender)
            && h.mflags[0] & mflag0::PAUSED != 0
            && self.failover.mf_master_offset == -1
        {
            self.failover.mf_master_offset = h.offset as i64;
            let off = h.offset;
            self.log(
                Level::Warning,
                format!("Received replication offset for paused master manual failover: {off}"),
            );
        }
    }

    /// Redis's `clusterHandleManualFailover`.
    pub fn handle_manual_failover(&mut self) {
        let f = &self.failover;
        if f.mf_end == 0 || f.mf_can_start || f.mf_master_offset == -1 {
            return;
        }
        if f.mf_master_offset == self.my_repl_offset as i64 {
            self.failover.mf_can_start = true;
            self.log(
                Level::Warning,
                "All master replication stream processed, manual failover can start.".into(),
            );
        }
    }

    /// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica.
    pub fn start_manual_failover(
        &mut self,
        force: bool,
        takeover: bool,
        now: i64,
    ) -> Result<(), &'static str> {
        if self.myself_is_master() {
            return Err("ERR You should send CLUSTER FAILOVER to a replica");
        }
        let Some(master) = self.my_master().and_then(|m| self.nodes.get(&m)) else {
            return Err("ERR I'm a replica but my master is unknown to me");
        };
        if !force && (master.failed() || master.link.is_none()) {
            return Err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE");
        }
        let (master_name, link) = (master.name, master.link);
        self.reset_manual_failover();
        self.failover.mf_end = now + MF_TIMEOUT;
        if takeover {
            self.log(
                Level::Warning,
                "Taking over the master (user request).".into(),
            );
            self.bump_epoch_without_consensus();
            self.replace_my_master(now);
        } else if force {
            self.log(
                Level::Warning,
                "Forced failover user request accepted.".into(),
            );
            self.failover.mf_can_start = true;
        } else {
            self.log(
                Level::Warning,
                "Manual failover user request accepted.".into(),
            );
            if let Some(l) = link {
                let msg = self.empty_message(ty::MFSTART);
                self.send_message(l, &msg);
            }
            let _ = master_name;
        }
        Ok(())
    }

    /// A manual failover past its deadline is abandoned.
    pub fn manual_failover_check_timeout(&mut self, now: i64) {
        if self.failover.mf_end != 0 && self.failover.mf_end < now {
            self.log(Level::Warning, "Manual failover timed out.".into());
            self.reset_manual_failover();
        }
    }

    /// Redis's `clusterHandleSlaveMigration`: a replica of the master with the most working
    /// replicas moves to an orphaned master.
    pub fn replica_migration(&mut self, max_replicas: usize, now: i64) {
        if !self.ok {
            return;
        }
        let Some(mymaster) = self.my_master() else {
            return;
        };
        let ok_replicas = self.ok_replicas(mymaster);
        if ok_replicas <= self.settings.migration_barrier {
            return;
        }
        let mut candidate = self.myself;
        let mut target = None;
        let names: Vec<NodeName> = self.nodes.keys().copied().collect();
        for name in names {
            let Some(n) = self.nodes.get(&name) else {
                continue;
            };
            let mut orphaned = !(n.is_replica() || n.failed()) && n.flags & nf::MIGRATE_TO != 0;
            let ok = if n.is_master() {
                self.ok_replicas(name)
            } else {
                0
            };
            if ok > 0 {
                orphaned = false;
            }
            let numslots = n.numslots;
            let replicas = n.replicas.clone();
            if let Some(n) = self.nodes.get_mut(&name) {
                if orphaned {
                    if target.is_none() && numslots > 0 {
                        target = Some(name);
                    }
                    if n.orphaned_time == 0 {
                        n.orphaned_time = now;
                    }
                } else {
                    n.orphaned_time = 0;
                }
            }
            if ok == max_replicas {
                for r in replicas {
                    if r < candidate {
                        candidate = r;
                    }
                }
            }
        }
        let Some(t) = target else { return };
        let since = self
            .nodes
            .get(&t)
            .map(|n| now - n.orphaned_time)
            .unwrap_or(0);
        if candidate == self.myself && since > REPLICA_MIGRATION_DELAY {
            self.log(
                Level::Warning,
                format!("Migrating to orphaned master {}", wire::name_str(&t)),
            );
            self.set_master(t);
        }
    }

    /// Replicas of `master` not failing (Redis's `clusterCountNonFailingSlaves`).
    pub fn ok_replicas(&self, master: NodeName) -> usize {
        self.nodes.get(&master).map_or(0, |m| {
            m.replicas
                .iter()
                .filter_map(|r| self.nodes.get(r))
                .filter(|r| !r.failed())
                .count()
        })
    }
}
