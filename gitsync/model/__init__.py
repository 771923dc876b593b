"""The MyApp API as values: its group, kind and the names gitsync puts on objects
(``api``), its schema (``schema``), resource quantities (``quantity``), the Deployment a
MyApp renders to (``render``), what ``MyApp.status`` says (``myapp_status``), and the
identity of one gitsync instance (``instance``).

No I/O. May import errors only.
"""
