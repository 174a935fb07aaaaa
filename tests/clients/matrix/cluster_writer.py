"""redis-py's RedisCluster (unmodified) writing keys and documents to a cluster while it is
resharded, run by tests/cluster_clients.rs.

Usage: python3 cluster_writer.py PORT PREFIX STOP_FILE

Writes PREFIX:i = i (and, every tenth write, a document into the collection {PREFIX}docs)
until STOP_FILE exists, then reads every acknowledged write back. Any error that reaches
the application (redis-py retries MOVED and ASK itself) is a failure. Prints
"acknowledged N, lost M, errors E" and exits non-zero unless M and E are 0.
"""
import json
import os
import sys
import time

from redis.cluster import RedisCluster

port, prefix, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
coll = "{%s}docs" % prefix
acked, docs, errors = 0, 0, []
deadline = time.time() + 120
i = 0
while not os.path.exists(stop) and time.time() < deadline:
    try:
        rc.set(f"{prefix}:{i}", i)
        acked = i + 1
        if i % 10 == 0:
            rc.execute_command("DOC.INSERT", coll, json.dumps({"_id": i, "n": i}), target_nodes=rc.get_node_from_key(coll))
            docs += 1
    except Exception as e:  # any error the client did not retry away
        errors.append(f"write {i}: {e!r}")
        if len(errors) > 20:
            break
    i += 1
lost = 0
for j in range(acked):
    v = rc.get(f"{prefix}:{j}")
    if v != str(j):
        lost += 1
count = rc.execute_command("DOC.COUNT", coll, "{}", target_nodes=rc.get_node_from_key(coll))
if int(count) != docs:
    errors.append(f"documents: {count} found, {docs} acknowledged")
print(f"acknowledged {acked}, lost {lost}, errors {len(errors)}, documents {docs}")
for e in errors[:20]:
    print(e)
sys.exit(0 if lost == 0 and not errors else 1)
