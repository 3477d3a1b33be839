"""tierlog-fsspec: remote storage for tierlog on any fsspec filesystem."""
