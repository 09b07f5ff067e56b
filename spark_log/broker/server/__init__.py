"""The request path (Kafka's SocketServer, KafkaApis): the listener that owns the client
sockets, one `Connection` per client, the dispatcher from frames to handlers and back, the
`RequestContext` a handler gets, and `Services`, the broker as handlers see it, typed by narrow
protocols.

May import every broker package below it (metrics/, topics/, transaction/, group/,
replication/) for value types only, and storage/, protocol/, records/; the concrete
coordinators and managers are reached through `Services`, never imported.
"""
