"""Consumer groups: the coordinator, its protocols and the state it keeps in __consumer_offsets."""
