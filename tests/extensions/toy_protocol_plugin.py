"""What a third-party package's ``semshift.protocols`` entry point names: importing it registers
the toy protocol."""

from tests.extensions import toy_protocol

toy_protocol.register()
