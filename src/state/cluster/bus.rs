//! The bus's logic, as Redis 7.0's `cluster.c`: building PING/PONG/MEET with their gossip,
//! processing every message type, failure detection, and the cron that keeps links up and
//! pings nodes. No sockets here: messages go out through the links' senders, and the
//! connections to open are left for the network side (`ClusterState::connects`).

use super::{todo, ClusterState, Connect, Node, SLOTS};
use crate::protocol::cluster_bus::{
    self as wire, mflag0, msg_type as ty, node_flag as nf, Body, Ext, Gossip, Header, Message,
    NodeName,
};
use crate::state::redis_log::Level;

/// What processing asks of the rest of the server once the state's lock is released.
#[derive(Default)]
pub struct Effects {
    /// Messages to deliver to this node's subscribers: (sharded, channel, message).
    pub publish: Vec<(bool, Vec<u8>, Vec<u8>)>,
    /// Start replicating from this address (this node became a replica).
    pub replicate_to: Option<(String, u16)>,
    /// Slots this node lost while holding keys: their keys are deleted.
    pub delete_slots: Vec<u16>,
    /// This replica won an election (or took over): it stops replicating and serves its
    /// master's slots.
    pub promote: bool,
    /// Slots this node's shard stopped serving: their shard channels' subscribers here are
    /// unsubscribed (Redis's `removeChannelsInSlot`).
    pub channel_slots: Vec<u16>,
}

const BLACKLIST_TTL_MS: i64 = 60_000;

impl ClusterState {
    // ---- sending ----

    pub(super) fn header_for(&self, t: u16) -> Header {
        let me = self.me();
        let master = match me {
            Some(m) if m.is_replica() => m.slaveof.and_then(|s| self.nodes.get(&s)).or(me),
            _ => me,
        };
        let mut myslots = Box::new([0u8; SLOTS / 8]);
        if let Some(m) = master {
            myslots.copy_from_slice(&m.slots[..]);
        }
        let mut mflags = [0u8; 3];
        // A master paused for a manual failover says so: its offset is final.
        if me.is_some_and(|m| m.is_master()) && self.failover.mf_end != 0 {
            mflags[0] |= mflag0::PAUSED;
        }
        Header {
            ty: t,
            port: self.my_port,
            count: 0,
            current_epoch: self.current_epoch,
            config_epoch: master.map(|m| m.config_epoch).unwrap_or(0),
            offset: self.my_repl_offset,
            sender: self.myself,
            myslots,
            slaveof: me.and_then(|m| m.slaveof).unwrap_or([0; 40]),
            myip: self.settings.announce_ip.clone(),
            pport: self.my_pport,
            cport: self.my_cport,
            flags: me.map(|m| m.flags).unwrap_or(0),
            state: if self.ok { 0 } else { 1 },
            mflags,
        }
    }

    pub(super) fn send_message(&mut self, link: u64, msg: &Message) {
        let mut out = Vec::with_capacity(wire::HEADER_LEN + 256);
        wire::encode(msg, &mut out);
        self.send_bytes(link, out, msg.header.ty);
    }

    pub(super) fn broadcast_message(&mut self, msg: &Message) {
        let mut out = Vec::with_capacity(wire::HEADER_LEN + 256);
        wire::encode(msg, &mut out);
        for l in self.linked_peers() {
            self.send_bytes(l, out.clone(), msg.header.ty);
        }
    }

    /// The links to every other node out of handshake: where a broadcast goes (Redis's
    /// `clusterBroadcastMessage`).
    fn linked_peers(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.flags & (nf::MYSELF | nf::HANDSHAKE) == 0)
            .filter_map(|n| n.link)
            .collect()
    }

    fn gossip_of(n: &Node) -> Gossip {
        Gossip {
            nodename: n.name,
            ping_sent: (n.ping_sent / 1000) as u32,
            pong_received: (n.pong_received / 1000) as u32,
            ip: n.ip.clone(),
            port: n.port,
            cport: n.cport,
            flags: n.flags,
            pport: n.pport,
        }
    }

    /// Redis's `clusterSendPing`: a PING, PONG or MEET with gossip about a tenth of the
    /// nodes (at least 3) and every node in PFAIL.
    pub fn send_ping(&mut self, link: u64, t: u16, now: i64) {
        self.pings_sent += 1;
        let stamp = self.pings_sent;
        let Some(l) = self.links.get(&link) else {
            return;
        };
        let (inbound, target) = (l.inbound, l.node);
        if !inbound && t == ty::PING {
            if let Some(n) = target.and_then(|t| self.nodes.get_mut(&t)) {
                n.ping_sent = now;
            }
        }
        let total = self.nodes.len();
        let mut fresh = total.saturating_sub(2);
        let wanted = (total / 10).max(3).min(fresh);
        let mut gossip = Vec::with_capacity(wanted + self.stats_pfail_nodes);
        // A random start in the node table stands for Redis's random picks.
        let names: Vec<NodeName> = self.nodes.keys().copied().collect();
        let start = if names.is_empty() {
            0
        } else {
            (now as usize ^ stamp as usize).wrapping_mul(2654435761) % names.len()
        };
        let mut tries = wanted * 3;
        let mut i = start;
        while fresh > 0 && gossip.len() < wanted && tries > 0 && !names.is_empty() {
            tries -= 1;
            let name = names[i % names.len()];
            i += 1;
            let Some(n) = self.nodes.get_mut(&name) else {
                continue;
            };
            if n.flags & nf::MYSELF != 0 || n.flags & nf::PFAIL != 0 {
                continue;
            }
            if n.flags & (nf::HANDSHAKE | nf::NOADDR) != 0 || (n.link.is_none() && n.numslots == 0)
            {
                fresh -= 1;
                continue;
            }
            if n.last_in_ping_gossip == stamp {
                continue;
            }
            n.last_in_ping_gossip = stamp;
            gossip.push(Self::gossip_of(n));
            fresh -= 1;
        }
        for n in self.nodes.values() {
            if n.flags & (nf::HANDSHAKE | nf::NOADDR) == 0 && n.flags & nf::PFAIL != 0 {
                gossip.push(Self::gossip_of(n));
            }
        }
        let mut exts = Vec::new();
        let hostname = self.me().map(|m| m.hostname.clone()).unwrap_or_default();
        if !hostname.is_empty() {
            exts.push(Ext::Hostname(hostname));
        }
        let msg = Message {
            header: self.header_for(t),
            body: Body::Ping { gossip, exts },
        };
        self.send_message(link, &msg);
    }

    /// Redis's `clusterBroadcastPong(CLUSTER_BROADCAST_ALL)`.
    pub fn broadcast_pong(&mut self, now: i64) {
        for l in self.linked_peers() {
            self.send_ping(l, ty::PONG, now);
        }
    }

    /// Redis's `clusterBroadcastPong(CLUSTER_BROADCAST_LOCAL_SLAVES)`: the replicas of this
    /// node's master (or of this master).
    pub(super) fn broadcast_pong_to_local_replicas(&mut self, now: i64) {
        let me = self.myself;
        let my_master = self.my_master();
        let targets: Vec<u64> = self
            .nodes
            .values()
            .filter(|n| n.flags & (nf::MYSELF | nf::HANDSHAKE) == 0 && n.is_replica())
            .filter(|n| n.slaveof.is_some() && (n.slaveof == Some(me) || n.slaveof == my_master))
            .filter_map(|n| n.link)
            .collect();
        for l in targets {
            self.send_ping(l, ty::PONG, now);
        }
    }

    fn send_fail(&mut self, about: NodeName) {
        let msg = Message {
            header: self.header_for(ty::FAIL),
            body: Body::Fail { about },
        };
        self.broadcast_message(&msg);
    }

    fn send_update(&mut self, link: Option<u64>, about: NodeName) {
        let Some(link) = link else {
            return;
        };
        let Some(n) = self.nodes.get(&about) else {
            return;
        };
        let mut slots = n.slots.clone();
        for (b, not) in slots.iter_mut().zip(self.owner_not_claiming.iter()) {
            *b &= !*not;
        }
        let msg = Message {
            header: self.header_for(ty::UPDATE),
            body: Body::Update {
                config_epoch: n.config_epoch,
                nodename: about,
                slots,
            },
        };
        self.send_message(link, &msg);
    }

    /// Redis's `clusterPropagatePublish`: PUBLISH to every node, SPUBLISH to this node's
    /// shard (its master and replicas).
    pub fn propagate_publish(&mut self, channel: &[u8], message: &[u8], sharded: bool) {
        let t = if sharded {
            ty::PUBLISHSHARD
        } else {
            ty::PUBLISH
        };
        let msg = Message {
            header: self.header_for(t),
            body: Body::Publish {
                channel: channel.to_vec(),
                message: message.to_vec(),
            },
        };
        if !sharded {
            self.broadcast_message(&msg);
            return;
        }
        let me = self.myself;
        let master = self.my_master().unwrap_or(me);
        let mut shard: Vec<NodeName> = vec![master];
        if let Some(m) = self.nodes.get(&master) {
            shard.extend(m.replicas.iter().copied());
        }
        let mut out = Vec::new();
        wire::encode(&msg, &mut out);
        let links: Vec<u64> = shard
            .iter()
            .filter(|n| **n != me)
            .filter_map(|n| self.nodes.get(n).and_then(|n| n.link))
            .collect();
        for l in links {
            self.send_bytes(l, out.clone(), t);
        }
    }

    // ---- links from the network side ----

    /// An accepted connection on the bus port: a link with no node yet.
    pub fn accept(
        &mut self,
        peer_ip: String,
        local_ip: String,
        now: i64,
    ) -> (
        u64,
        tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) {
        let (id, rx, pending) = self.new_link(None, true, now);
        if let Some(l) = self.links.get_mut(&id) {
            l.peer_ip = peer_ip;
            l.local_ip = local_ip;
        }
        (id, rx, pending)
    }

    /// An outbound connection is made: send the first PING, or MEET to a node met by
    /// CLUSTER MEET (Redis's `clusterLinkConnectHandler`).
    pub fn connected(&mut self, link: u64, peer_ip: String, local_ip: String, now: i64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        l.connecting = false;
        l.peer_ip = peer_ip;
        l.local_ip = local_ip;
        let Some(name) = l.node else {
            return;
        };
        let Some(n) = self.nodes.get_mut(&name) else {
            return;
        };
        let old_ping_sent = n.ping_sent;
        let meet = n.flags & nf::MEET != 0;
        n.flags &= !nf::MEET;
        self.send_ping(link, if meet { ty::MEET } else { ty::PING }, now);
        if old_ping_sent != 0 {
            // A ping was pending before the reconnection: keep its time, so failure
            // detection does not restart.
            if let Some(n) = self.nodes.get_mut(&name) {
                n.ping_sent = old_ping_sent;
            }
        }
    }

    /// The network side lost a link (I/O error, peer closed, connect failed).
    pub fn link_lost(&mut self, link: u64) {
        self.free_link(link);
    }

    fn set_inbound_link(&mut self, name: NodeName, link: u64) {
        let old = self.nodes.get(&name).and_then(|n| n.inbound_link);
        if old == Some(link) {
            return;
        }
        if let Some(old) = old {
            // A node has one inbound link at a time: the newer wins.
            self.free_link(old);
        }
        if let Some(n) = self.nodes.get_mut(&name) {
            n.inbound_link = Some(link);
        }
        if let Some(l) = self.links.get_mut(&link) {
            l.node = Some(name);
        }
    }

    // ---- receiving ----

    /// Redis's `clusterProcessPacket`. Returns false when the link was freed.
    pub fn process(
        &mut self,
        link: u64,
        msg: Message,
        now: i64,
        keys_in_slot: &dyn Fn(u16) -> usize,
    ) -> bool {
        let h = &msg.header;
        let t = h.ty;
        if let Some(c) = self.stats_received.get_mut(t as usize) {
            *c += 1;
        }
        let Some(l) = self.links.get(&link) else {
            return false;
        };
        if i64::from(t) == self.drop_filter {
            self.log(
                Level::Warning,
                "Dropping packet that matches debug drop filter".into(),
            );
            return true;
        }
        let (inbound, link_node) = (l.inbound, l.node);
        // The sender: the link's node unless that one is still in handshake (its name is
        // a random one), else looked up by the header's name.
        let mut sender = match link_node.and_then(|n| self.nodes.get(&n)) {
            Some(n) if !n.in_handshake() => Some(n.name),
            _ => {
                let s = self.nodes.contains_key(&h.sender).then_some(h.sender);
                if let (Some(s), None) = (s, link_node) {
                    self.set_inbound_link(s, link);
                }
                s
            }
        };
        if let Some(s) = sender.and_then(|s| self.nodes.get_mut(&s)) {
            s.data_received = now;
        }
        let mut sender_config_epoch = 0;
        let mut sender_current_epoch = 0;
        if let Some(s) = sender {
            if self.nodes.get(&s).is_some_and(|n| !n.in_handshake()) {
                sender_current_epoch = h.current_epoch;
                sender_config_epoch = h.config_epoch;
                if sender_current_epoch > self.current_epoch {
                    self.current_epoch = sender_current_epoch;
                }
                if let Some(n) = self.nodes.get_mut(&s) {
                    if sender_config_epoch > n.config_epoch {
                        n.config_epoch = sender_config_epoch;
                        self.todo |= todo::SAVE_CONFIG | todo::FSYNC_CONFIG;
                    }
                    n.repl_offset = h.offset;
                    n.repl_offset_time = now;
                }
                self.master_offset_seen(s, h);
            }
        }

        if t == ty::PING || t == ty::MEET {
            // A MEET tells this node its address (as the peer reached it), as does any
            // PING while this node knows none.
            let my_ip_empty = self.me().is_none_or(|m| m.ip.is_empty());
            if (t == ty::MEET || my_ip_empty) && self.settings.announce_ip.is_empty() {
                let local = self
                    .links
                    .get(&link)
                    .map(|l| l.local_ip.clone())
                    .unwrap_or_default();
                if !local.is_empty() && self.me().is_some_and(|m| m.ip != local) {
                    if let Some(m) = self.me_mut() {
                        m.ip = local.clone();
                    }
                    self.log(
                        Level::Warning,
                        format!("IP address for this node updated to {local}"),
                    );
                    self.todo |= todo::SAVE_CONFIG;
                }
            }
            if sender.is_none() && t == ty::MEET {
                let mut node = Node::new(super::random_name(&mut self.rng), nf::HANDSHAKE, now);
                node.ip = if !h.myip.is_empty() {
                    h.myip.clone()
                } else {
                    self.links
                        .get(&link)
                        .map(|l| l.peer_ip.clone())
                        .unwrap_or_default()
                };
                node.port = h.port;
                node.pport = h.pport;
                node.cport = h.cport;
                self.add_node(node);
                self.todo |= todo::SAVE_CONFIG;
                // A MEET's gossip is trusted: the sender asked to join.
                if let Body::Ping { gossip, .. } = &msg.body {
                    self.process_gossip(None, gossip, now);
                }
            }
            self.send_ping(link, ty::PONG, now);
        }

        if t == ty::PING || t == ty::PONG || t == ty::MEET {
            if !inbound {
                let Some(ln) = link_node else {
                    return true;
                };
                let in_handshake = self.nodes.get(&ln).is_some_and(|n| n.in_handshake());
                if in_handshake {
                    if let Some(s) = sender {
                        // The node is known already: update its address, drop the
                        // handshake node (and this link with it).
                        if self.update_address(s, link, h) {
                            self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE;
                        }
                        self.del_node(ln);
                        return false;
                    }
                    self.rename_node(ln, h.sender);
                    if let Some(n) = self.nodes.get_mut(&h.sender) {
                        n.flags &= !nf::HANDSHAKE;
                        n.flags |= h.flags & (nf::MASTER | nf::SLAVE);
                    }
                    self.todo |= todo::SAVE_CONFIG;
                    // The handshake is complete: the node is the sender from here on.
                    sender = Some(h.sender);
                } else if ln != h.sender {
                    // A PONG from another node than expected: forget the address.
                    if let Some(n) = self.nodes.get_mut(&ln) {
                        n.flags |= nf::NOADDR;
                        n.ip.clear();
                        n.port = 0;
                        n.pport = 0;
                        n.cport = 0;
                    }
                    self.free_link(link);
                    self.todo |= todo::SAVE_CONFIG;
                    return false;
                }
            }

            if let Some(n) = sender.and_then(|s| self.nodes.get_mut(&s)) {
                n.flags = (n.flags & !nf::NOFAILOVER) | (h.flags & nf::NOFAILOVER);
            }

            if let Some(s) = sender {
                if t == ty::PING
                    && self.nodes.get(&s).is_some_and(|n| !n.in_handshake())
                    && self.update_address(s, link, h)
                {
                    self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE;
                }
            }

            if !inbound && t == ty::PONG {
                if let Some(ln) = self.links.get(&link).and_then(|l| l.node) {
                    let mut clear = false;
                    if let Some(n) = self.nodes.get_mut(&ln) {
                        n.pong_received = now;
                        n.ping_sent = 0;
                        if n.timed_out() {
                            n.flags &= !nf::PFAIL;
                            self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE;
                        } else if n.failed() {
                            clear = true;
                        }
                    }
                    if clear {
                        self.clear_failure_if_needed(ln, now);
                    }
                }
            }

            // A role switch: master → replica or replica → master (or a new master).
            if let Some(s) = sender {
                if wire::name_is_null(&h.slaveof) {
                    self.set_node_as_master(s);
                } else {
                    let master = self.nodes.contains_key(&h.slaveof).then_some(h.slaveof);
                    if self.nodes.get(&s).is_some_and(Node::is_master) {
                        self.del_node_slots(s);
                        if let Some(n) = self.nodes.get_mut(&s) {
                            n.flags &= !(nf::MASTER | nf::MIGRATE_TO);
                            n.flags |= nf::SLAVE;
                        }
                        self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE;
                    }
                    if let Some(m) = master {
                        let old = self.nodes.get(&s).and_then(|n| n.slaveof);
                        if old != Some(m) {
                            if let Some(o) = old.and_then(|o| self.nodes.get_mut(&o)) {
                                o.replicas.retain(|r| *r != s);
                            }
                            if let Some(mn) = self.nodes.get_mut(&m) {
                                if !mn.replicas.contains(&s) {
                                    mn.replicas.push(s);
                                }
                            }
                            if let Some(n) = self.nodes.get_mut(&s) {
                                n.slaveof = Some(m);
                            }
                            self.todo |= todo::SAVE_CONFIG;
                        }
                    }
                }
            }

            // The slots the sender (or its master) claims.
            let mut dirty = false;
            if let Some(s) = sender {
                let sender_master = match self.nodes.get(&s) {
                    Some(n) if n.is_master() => Some(s),
                    Some(n) => n.slaveof,
                    None => None,
                };
                if let Some(sm) = sender_master.and_then(|m| self.nodes.get(&m)) {
                    dirty = sm.slots[..] != h.myslots[..];
                }
            }
            if let Some(s) = sender {
                if dirty && self.nodes.get(&s).is_some_and(Node::is_master) {
                    let slots = h.myslots.clone();
                    self.update_slots_config_with(s, sender_config_epoch, &slots, keys_in_slot);
                }
            }
            // The sender claims slots some node holds with a greater epoch: tell it.
            if let Some(s) = sender {
                if dirty {
                    for j in 0..SLOTS as u16 {
                        if !wire::slot_bit(&h.myslots, j) {
                            continue;
                        }
                        let owner = self.slots[j as usize];
                        if owner == Some(s) || self.slot_is_unclaimed(j) {
                            continue;
                        }
                        let Some(o) = owner.and_then(|o| self.nodes.get(&o)) else {
                            continue;
                        };
                        if o.config_epoch > sender_config_epoch {
                            let about = o.name;
                            let to = self.nodes.get(&s).and_then(|n| n.link);
                            self.send_update(to, about);
                            break;
                        }
                    }
                }
            }
            // A config epoch collision between two masters.
            if let Some(s) = sender {
                let me_master = self.myself_is_master();
                let my_epoch = self.me().map(|m| m.config_epoch).unwrap_or(0);
                let sn = self.nodes.get(&s);
                if me_master
                    && sn.is_some_and(|n| n.is_master() && n.config_epoch == my_epoch)
                    && sender_config_epoch == my_epoch
                    && s > self.myself
                {
                    self.current_epoch += 1;
                    let e = self.current_epoch;
                    if let Some(m) = self.me_mut() {
                        m.config_epoch = e;
                    }
                    self.todo |= todo::SAVE_CONFIG | todo::FSYNC_CONFIG;
                    self.log(
                        Level::Verbose,
                        format!(
                            "WARNING: configEpoch collision with node {}. configEpoch set to {e}",
                            wire::name_str(&s)
                        ),
                    );
                }
            }
            if let (Some(s), Body::Ping { gossip, exts }) = (sender, &msg.body) {
                self.process_gossip(Some(s), gossip, now);
                let mut hostname = String::new();
                for e in exts {
                    if let Ext::Hostname(hn) = e {
                        hostname = hn.clone();
                    }
                }
                if let Some(n) = self.nodes.get_mut(&s) {
                    if n.hostname != hostname {
                        n.hostname = hostname;
                        self.todo |= todo::SAVE_CONFIG;
                    }
                }
            }
            return true;
        }

        match (&msg.body, t) {
            (Body::Fail { about }, ty::FAIL) => {
                if sender.is_none() {
                    return true;
                }
                if let Some(n) = self.nodes.get_mut(about) {
                    if n.flags & (nf::FAIL | nf::MYSELF) == 0 {
                        n.flags |= nf::FAIL;
                        n.fail_time = now;
                        n.flags &= !nf::PFAIL;
                        let (from, about) = (wire::name_str(&h.sender), n.name_str().to_string());
                        let line = format!("FAIL message received from {from} about {about}");
                        self.log(Level::Notice, line);
                        self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE;
                    }
                }
            }
            (Body::Publish { channel, message }, _) if sender.is_some() => {
                self.fx
                    .publish
                    .push((t == ty::PUBLISHSHARD, channel.clone(), message.clone()));
            }
            (
                Body::Update {
                    config_epoch,
                    nodename,
                    slots,
                },
                ty::UPDATE,
            ) => {
                if sender.is_none() {
                    return true;
                }
                let Some(n) = self.nodes.get(nodename) else {
                    return true;
                };
                if n.config_epoch >= *config_epoch {
                    return true;
                }
                let name = n.name;
                if n.is_replica() {
                    self.set_node_as_master(name);
                }
                if let Some(n) = self.nodes.get_mut(&name) {
                    n.config_epoch = *config_epoch;
                }
                self.todo |= todo::SAVE_CONFIG | todo::FSYNC_CONFIG;
                self.update_slots_config_with(name, *config_epoch, slots, keys_in_slot);
            }
            (Body::Empty, ty::FAILOVER_AUTH_REQUEST) => {
                if let Some(s) = sender {
                    self.vote_if_needed(s, h, now);
                }
            }
            (Body::Empty, ty::FAILOVER_AUTH_ACK) => {
                if let Some(s) = sender {
                    self.vote_received(s, sender_current_epoch, now);
                }
            }
            (Body::Empty, ty::MFSTART) => {
                if let Some(s) = sender {
                    self.manual_failover_requested(s, link, now);
                }
            }
            // MODULE messages have no receiver here (no modules).
            _ => {}
        }
        true
    }

    /// Redis's `nodeUpdateAddressIfNeeded`: true when the address changed.
    fn update_address(&mut self, name: NodeName, link: u64, h: &Header) -> bool {
        let Some(n) = self.nodes.get(&name) else {
            return false;
        };
        if n.link == Some(link) {
            return false;
        }
        let ip = if !h.myip.is_empty() {
            h.myip.clone()
        } else {
            match self.links.get(&link) {
                Some(l) if !l.peer_ip.is_empty() => l.peer_ip.clone(),
                _ => return false,
            }
        };
        if n.port == h.port && n.cport == h.cport && n.pport == h.pport && n.ip == ip {
            return false;
        }
        let old_link = n.link;
        if let Some(n) = self.nodes.get_mut(&name) {
            n.ip = ip.clone();
            n.port = h.port;
            n.pport = h.pport;
            n.cport = h.cport;
            n.flags &= !nf::NOADDR;
        }
        if let Some(l) = old_link {
            self.free_link(l);
        }
        self.log(
            Level::Warning,
            format!(
                "Address updated for node {}, now {ip}:{}",
                wire::name_str(&name),
                h.port
            ),
        );
        true
    }

    /// Redis's `clusterProcessGossipSection`. `sender` is None for a MEET from an unknown
    /// node: its gossip only refreshes what is known of nodes already known.
    fn process_gossip(&mut self, sender: Option<NodeName>, gossip: &[Gossip], now: i64) {
        let sender_is_master = sender
            .and_then(|s| self.nodes.get(&s))
            .is_some_and(Node::is_master);
        for g in gossip {
            let flags = g.flags;
            if self.nodes.contains_key(&g.nodename) {
                let name = g.nodename;
                if let Some(s) = sender {
                    if sender_is_master && name != self.myself {
                        if flags & (nf::FAIL | nf::PFAIL) != 0 {
                            if let Some(n) = self.nodes.get_mut(&name) {
                                match n.fail_reports.iter_mut().find(|(r, _)| *r == s) {
                                    Some(r) => r.1 = now,
                                    None => n.fail_reports.push((s, now)),
                                }
                            }
                            self.mark_failing_if_needed(name, now);
                        } else if let Some(n) = self.nodes.get_mut(&name) {
                            n.fail_reports.retain(|(r, _)| *r != s);
                        }
                    }
                }
                let reports = self.failure_reports(name, now);
                if let Some(n) = self.nodes.get_mut(&name) {
                    if flags & (nf::FAIL | nf::PFAIL) == 0 && n.ping_sent == 0 && reports == 0 {
                        let pongtime = g.pong_received as i64 * 1000;
                        if pongtime <= now + 500 && pongtime > n.pong_received {
                            n.pong_received = pongtime;
                        }
                    }
                    if n.flags & (nf::FAIL | nf::PFAIL) != 0
                        && flags & nf::NOADDR == 0
                        && flags & (nf::FAIL | nf::PFAIL) == 0
                        && (!n.ip.eq_ignore_ascii_case(&g.ip)
                            || n.port != g.port
                            || n.cport != g.cport)
                    {
                        let old = n.link.take();
                        n.ip = g.ip.clone();
                        n.port = g.port;
                        n.pport = g.pport;
                        n.cport = g.cport;
                        n.flags &= !nf::NOADDR;
                        if let Some(l) = old {
                            self.links.remove(&l);
                        }
                    }
                }
            } else if sender.is_some()
                && flags & nf::NOADDR == 0
                && !self.blacklisted(&g.nodename, now)
            {
                let mut node = Node::new(g.nodename, flags, now);
                node.ip = g.ip.clone();
                node.port = g.port;
                node.pport = g.pport;
                node.cport = g.cport;
                // Flags from gossip that describe the sender's view, not ours, are not kept.
                node.flags &= !(nf::MYSELF | nf::PFAIL | nf::FAIL | nf::MEET);
                self.add_node(node);
            }
        }
    }

    fn blacklisted(&mut self, name: &NodeName, now: i64) -> bool {
        self.blacklist.retain(|_, until| *until >= now);
        self.blacklist.contains_key(name)
    }

    pub fn blacklist_add(&mut self, name: NodeName, now: i64) {
        self.blacklist.retain(|_, until| *until >= now);
        self.blacklist.insert(name, now + BLACKLIST_TTL_MS);
    }

    /// Redis's `markNodeAsFailingIfNeeded`: PFAIL becomes FAIL on a majority of masters'
    /// reports, and the FAIL is broadcast.
    fn mark_failing_if_needed(&mut self, name: NodeName, now: i64) {
        let quorum = self.size / 2 + 1;
        let Some(n) = self.nodes.get(&name) else {
            return;
        };
        if !n.timed_out() || n.failed() {
            return;
        }
        let mut failures = self.failure_reports(name, now);
        if self.myself_is_master() {
            failures += 1;
        }
        if failures < quorum {
            return;
        }
        self.log(
            Level::Notice,
            format!(
                "Marking node {} as failing (quorum reached).",
                wire::name_str(&name)
            ),
        );
        if let Some(n) = self.nodes.get_mut(&name) {
            n.flags &= !nf::PFAIL;
            n.flags |= nf::FAIL;
            n.fail_time = now;
        }
        self.send_fail(name);
        self.todo |= todo::UPDATE_STATE | todo::SAVE_CONFIG;
    }

    /// Redis's `clearNodeFailureIfNeeded`.
    fn clear_failure_if_needed(&mut self, name: NodeName, now: i64) {
        let undo = self.settings.node_timeout * 2;
        let Some(n) = self.nodes.get_mut(&name) else {
            return;
        };
        if n.is_replica() || n.numslots == 0 {
            n.flags &= !nf::FAIL;
            let what = if n.is_replica() {
                "replica"
            } else {
                "master without slots"
            };
            let line = format!(
                "Clear FAIL state for node {}: {what} is reachable again.",
                wire::name_str(&name)
            );
            self.log(Level::Notice, line);
            self.todo |= todo::UPDATE_STATE | todo::SAVE_CONFIG;
            return;
        }
        if n.is_master() && n.numslots > 0 && now - n.fail_time > undo {
            n.flags &= !nf::FAIL;
            let line = format!("Clear FAIL state for node {}: is reachable again and nobody is serving its slots after some time.", wire::name_str(&name));
            self.log(Level::Notice, line);
            self.todo |= todo::UPDATE_STATE | todo::SAVE_CONFIG;
        }
    }

    /// Redis's `clusterUpdateSlotsConfigWith`.
    fn update_slots_config_with(
        &mut self,
        sender: NodeName,
        sender_epoch: u64,
        slots: &wire::SlotBitmap,
        keys_in_slot: &dyn Fn(u16) -> usize,
    ) {
        if sender == self.myself {
            self.log(
                Level::Warning,
                "Discarding UPDATE message about myself.".into(),
            );
            return;
        }
        let me = self.myself;
        let curmaster = if self.myself_is_master() {
            Some(me)
        } else {
            self.my_master()
        };
        let mut newmaster = None;
        let mut dirty_slots = Vec::new();
        let mut sender_slots = 0;
        let mut migrated_our_slots = 0;
        for j in 0..SLOTS as u16 {
            if wire::slot_bit(slots, j) {
                sender_slots += 1;
                if self.slots[j as usize] == Some(sender) {
                    wire::set_slot_bit(&mut self.owner_not_claiming, j, false);
                    continue;
                }
                if self.importing_from.contains_key(&j) {
                    continue;
                }
                let owner_epoch = self.slots[j as usize]
                    .and_then(|o| self.nodes.get(&o))
                    .map(|o| o.config_epoch);
                if self.slot_is_unclaimed(j) || owner_epoch.is_some_and(|e| e < sender_epoch) {
                    if self.slots[j as usize] == Some(me)
                        && !self.exporting.contains(&j)
                        && keys_in_slot(j) > 0
                    {
                        dirty_slots.push(j);
                    }
                    if self.slots[j as usize].is_some() && self.slots[j as usize] == curmaster {
                        newmaster = Some(sender);
                        migrated_our_slots += 1;
                    }
                    self.del_slot(j);
                    self.add_slot(sender, j);
                    wire::set_slot_bit(&mut self.owner_not_claiming, j, false);
                    self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG;
                }
            } else if self.slots[j as usize] == Some(sender) {
                wire::set_slot_bit(&mut self.owner_not_claiming, j, true);
            }
        }
        let cur_numslots = curmaster
            .and_then(|c| self.nodes.get(&c))
            .map(|c| c.numslots)
            .unwrap_or(0);
        let allow_migration = self.settings.allow_replica_migration;
        if newmaster.is_some()
            && cur_numslots == 0
            && (allow_migration || sender_slots == migrated_our_slots)
        {
            self.log(
                Level::Warning,
                format!(
                    "Configuration change detected. Reconfiguring myself as a replica of {}",
                    wire::name_str(&sender)
                ),
            );
            self.set_master(sender);
            self.todo |= todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG;
        } else if !dirty_slots.is_empty() {
            self.fx.delete_slots.extend(dirty_slots);
        }
    }

    // ---- cron ----

    /// Redis's `clusterCron`, run ten times a second.
    pub fn cron(&mut self, now: i64) {
        self.iteration += 1;
        let handshake_timeout = self.settings.node_timeout.max(1000);
        let node_timeout = self.settings.node_timeout;
        self.stats_pfail_nodes = 0;
        let names: Vec<NodeName> = self.nodes.keys().copied().collect();
        // Links over their send buffer limit are freed (and reconnected below).
        let limit = self.settings.link_sendbuf_limit;
        if limit > 0 {
            let over: Vec<u64> = self
                .links
                .values()
                .filter(|l| l.pending.load(std::sync::atomic::Ordering::Relaxed) > limit)
                .map(|l| l.id)
                .collect();
            for l in over {
                self.links_buffer_limit_exceeded += 1;
                self.free_link(l);
            }
        }
        for name in &names {
            let Some(n) = self.nodes.get(name) else {
                continue;
            };
            if n.flags & (nf::MYSELF | nf::NOADDR) != 0 {
                continue;
            }
            if n.flags & nf::PFAIL != 0 {
                self.stats_pfail_nodes += 1;
            }
            if n.in_handshake() && now - n.ctime > handshake_timeout {
                self.del_node(*name);
                continue;
            }
            if n.link.is_none() {
                let (ip, port) = (n.ip.clone(), n.cport);
                let (id, rx, pending) = self.new_link(Some(*name), false, now);
                if let Some(n) = self.nodes.get_mut(name) {
                    n.link = Some(id);
                    // Failure detection needs a pending ping even before the link is up.
                    if n.ping_sent == 0 {
                        n.ping_sent = now;
                    }
                }
                self.connects.push(Connect {
                    link: id,
                    ip,
                    port,
                    rx,
                    pending,
                });
            }
        }

        // Ping one of five random nodes, the one with the oldest pong, once a second.
        if self.iteration.is_multiple_of(10) {
            let mut best: Option<(i64, u64)> = None;
            let len = names.len().max(1);
            for k in 0..5usize {
                let idx = (now as usize)
                    .wrapping_add(k.wrapping_mul(7919))
                    .wrapping_mul(2654435761)
                    % len;
                let Some(n) = names.get(idx).and_then(|nm| self.nodes.get(nm)) else {
                    continue;
                };
                let Some(l) = n.link else { continue };
                if n.ping_sent != 0 || n.flags & (nf::MYSELF | nf::HANDSHAKE) != 0 {
                    continue;
                }
                if self.links.get(&l).is_some_and(|l| l.connecting) {
                    continue;
                }
                if best.is_none_or(|(p, _)| p > n.pong_received) {
                    best = Some((n.pong_received, l));
                }
            }
            if let Some((_, l)) = best {
                self.send_ping(l, ty::PING, now);
            }
        }

        let mut update_state = false;
        for name in &names {
            let Some(n) = self.nodes.get(name) else {
                continue;
            };
            if n.flags & (nf::MYSELF | nf::NOADDR | nf::HANDSHAKE) != 0 {
                continue;
            }
            let ping_delay = now - n.ping_sent;
            let data_delay = now - n.data_received;
            let link = n.link.and_then(|l| self.links.get(&l));
            let link_ready = link.is_some_and(|l| !l.connecting);
            if let Some(l) = link {
                if now - l.ctime > node_timeout
                    && n.ping_sent != 0
                    && ping_delay > node_timeout / 2
                    && data_delay > node_timeout / 2
                {
                    let id = l.id;
                    self.free_link(id);
                    continue;
                }
            }
            if link_ready && n.ping_sent == 0 && now - n.pong_received > node_timeout / 2 {
                if let Some(l) = n.link {
                    self.send_ping(l, ty::PING, now);
                }
                continue;
            }
            if n.ping_sent == 0 {
                continue;
            }
            let delay = ping_delay.min(data_delay);
            if delay > node_timeout && n.flags & (nf::PFAIL | nf::FAIL) == 0 {
                if let Some(n) = self.nodes.get_mut(name) {
                    n.flags |= nf::PFAIL;
                }
                update_state = true;
            }
        }

        // A replica whose replication is off starts it once its master's address is known.
        let me_replica = !self.myself_is_master();
        if me_replica {
            if let Some(m) = self.my_master().and_then(|m| self.nodes.get(&m)) {
                let following = crate::state::replication::repl().master.lock().is_some();
                if !following && m.flags & nf::NOADDR == 0 && !m.ip.is_empty() {
                    self.fx.replicate_to = Some((m.ip.clone(), m.port));
                }
            }
        }
        self.manual_failover_check_timeout(now);
        if me_replica {
            self.handle_manual_failover();
            self.handle_replica_failover(now);
            // Orphaned masters (serving slots, no working replica, and used to have one), the
            // most working replicas a master has, and how many this node's master has.
            let mut orphaned = 0;
            let mut max_replicas = 0;
            let mut mine = 0;
            let my_master = self.my_master();
            for n in self.nodes.values() {
                if n.flags & (nf::MYSELF | nf::NOADDR | nf::HANDSHAKE) != 0 {
                    continue;
                }
                if n.is_master() && !n.failed() {
                    let ok = self.ok_replicas(n.name);
                    if ok == 0 && n.numslots > 0 && n.flags & nf::MIGRATE_TO != 0 {
                        orphaned += 1;
                    }
                    max_replicas = max_replicas.max(ok);
                    if my_master == Some(n.name) {
                        mine = ok;
                    }
                }
            }
            if orphaned > 0
                && max_replicas >= 2
                && mine == max_replicas
                && self.settings.allow_replica_migration
            {
                self.replica_migration(max_replicas, now);
            }
        }
        if update_state || !self.ok {
            self.update_state();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::key_slot;

    #[test]
    fn key_slots_are_redis_s() {
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }
}
