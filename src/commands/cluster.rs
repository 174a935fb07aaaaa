//! CLUSTER: this server is never a cluster node, so every subcommand answers what Redis
//! answers with `cluster-enabled no` ("ERR This instance has cluster support disabled").
//! The rows are Redis 7.0's, plus 7.2's MYSHARDID (arity, flags, categories, docs), so COMMAND INFO/DOCS, ACL
//! categories and scripts see what they see there: a script calling a NOSCRIPT one (CLUSTER
//! RESET) is refused before it runs.
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::Ctx;

const CLUSTER: CommandSpec = family("cluster", 0);
/// READONLY, READWRITE and ASKING: cluster commands in Redis's "connection" ACL category.
const CLUSTER_CONN: CommandSpec = family("cluster", acl::CONNECTION);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CLUSTER.cmd("cluster", -2, container)
        .doc("3.0.0", "A container for cluster commands").complexity("Depends on subcommand.")
        .subs(SUBCOMMANDS),
    CLUSTER_CONN.cmd("readonly", 1, disabled).flags(LOADING | STALE | FAST)
        .doc("3.0.0", "Enables read queries for a connection to a cluster replica node").complexity("O(1)"),
    CLUSTER_CONN.cmd("readwrite", 1, disabled).flags(LOADING | STALE | FAST)
        .doc("3.0.0", "Disables read queries for a connection to a cluster replica node").complexity("O(1)"),
    CLUSTER_CONN.cmd("asking", 1, disabled).flags(FAST)
        .doc("3.0.0", "Sent by cluster clients after an -ASK redirect").complexity("O(1)"),
];

#[rustfmt::skip]
static SUBCOMMANDS: &[CommandSpec] = &[
    CLUSTER.cmd("cluster|addslots", -3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Assign new hash slots to receiving node").complexity("O(N) where N is the total number of hash slot arguments"),
    CLUSTER.cmd("cluster|addslotsrange", -4, disabled).flags(ADMIN | STALE)
        .doc("7.0.0", "Assign new hash slots to receiving node").complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CLUSTER.cmd("cluster|bumpepoch", 2, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Advance the cluster config epoch").complexity("O(1)"),
    CLUSTER.cmd("cluster|count-failure-reports", 3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Return the number of failure reports active for a given node").complexity("O(N) where N is the number of failure reports"),
    CLUSTER.cmd("cluster|countkeysinslot", 3, disabled).flags(STALE)
        .doc("3.0.0", "Return the number of local keys in the specified hash slot").complexity("O(1)"),
    CLUSTER.cmd("cluster|delslots", -3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Set hash slots as unbound in receiving node").complexity("O(N) where N is the total number of hash slot arguments"),
    CLUSTER.cmd("cluster|delslotsrange", -4, disabled).flags(ADMIN | STALE)
        .doc("7.0.0", "Set hash slots as unbound in receiving node").complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CLUSTER.cmd("cluster|failover", -2, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Forces a replica to perform a manual failover of its master.").complexity("O(1)"),
    CLUSTER.cmd("cluster|flushslots", 2, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Delete a node's own slots information").complexity("O(1)"),
    CLUSTER.cmd("cluster|forget", 3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Remove a node from the nodes table").complexity("O(1)"),
    CLUSTER.cmd("cluster|getkeysinslot", 4, disabled).flags(STALE)
        .doc("3.0.0", "Return local key names in the specified hash slot").complexity("O(log(N)) where N is the number of requested keys"),
    CLUSTER.cmd("cluster|help", 2, disabled).flags(LOADING | STALE)
        .doc("5.0.0", "Show helpful text about the different subcommands").complexity("O(1)"),
    CLUSTER.cmd("cluster|info", 2, disabled).flags(STALE)
        .doc("3.0.0", "Provides info about Redis Cluster node state").complexity("O(1)"),
    CLUSTER.cmd("cluster|keyslot", 3, disabled).flags(STALE)
        .doc("3.0.0", "Returns the hash slot of the specified key").complexity("O(N) where N is the number of bytes in the key"),
    CLUSTER.cmd("cluster|links", 2, disabled).flags(STALE)
        .doc("7.0.0", "Returns a list of all TCP links to and from peer nodes in cluster").complexity("O(N) where N is the total number of Cluster nodes"),
    CLUSTER.cmd("cluster|meet", -4, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Force a node cluster to handshake with another node").complexity("O(1)"),
    CLUSTER.cmd("cluster|myid", 2, disabled).flags(STALE)
        .doc("3.0.0", "Return the node id").complexity("O(1)"),
    CLUSTER.cmd("cluster|myshardid", 2, disabled).flags(STALE)
        .doc("7.2.0", "Returns the shard ID of a node.").complexity("O(1)"),
    CLUSTER.cmd("cluster|nodes", 2, disabled).flags(STALE)
        .doc("3.0.0", "Get Cluster config for the node").complexity("O(N) where N is the total number of Cluster nodes"),
    CLUSTER.cmd("cluster|replicas", 3, disabled).flags(ADMIN | STALE)
        .doc("5.0.0", "List replica nodes of the specified master node").complexity("O(1)"),
    CLUSTER.cmd("cluster|replicate", 3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Reconfigure a node as a replica of the specified master node").complexity("O(1)"),
    CLUSTER.cmd("cluster|reset", -2, disabled).flags(ADMIN | NOSCRIPT | STALE)
        .doc("3.0.0", "Reset a Redis Cluster node").complexity("O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect."),
    CLUSTER.cmd("cluster|saveconfig", 2, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Forces the node to save cluster state on disk").complexity("O(1)"),
    CLUSTER.cmd("cluster|set-config-epoch", 3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Set the configuration epoch in a new node").complexity("O(1)"),
    CLUSTER.cmd("cluster|setslot", -4, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "Bind a hash slot to a specific node").complexity("O(1)"),
    CLUSTER.cmd("cluster|shards", 2, disabled).flags(STALE)
        .doc("7.0.0", "Get array of cluster slots to node mappings").complexity("O(N) where N is the total number of cluster nodes"),
    CLUSTER.cmd("cluster|slaves", 3, disabled).flags(ADMIN | STALE)
        .doc("3.0.0", "List replica nodes of the specified master node").complexity("O(1)"),
    CLUSTER.cmd("cluster|slots", 2, disabled).flags(STALE)
        .doc("3.0.0", "Get array of Cluster slot to node mappings").complexity("O(N) where N is the total number of Cluster nodes"),
];

fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

fn disabled(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::msg(
        "ERR This instance has cluster support disabled",
    ))
}
