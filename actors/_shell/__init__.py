"""The Thespian side: actor classes that turn messages into core events and core commands into sends,
and the I/O they need (storage writes, processes).
"""
