"""Brokers in separate processes: the controller's metadata store and the coordination engine
(ZooKeeper) that elects the controller and keeps track of live brokers."""
