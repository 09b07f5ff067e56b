"""What the group and transaction coordinators share (Kafka's coordinator-common): loading a
coordinator's partition batch by batch (`coordinator_loader`) and the protocols through which a
coordinator reaches its internal topic and partition logs (`collaborators`).

May import records/, storage/ types and the broker's errors; never group/, transaction/ or any
concrete broker part.
"""
