"""Test support: a real ``telha serve`` process on 127.0.0.1 and keys in its real SQLite file."""
