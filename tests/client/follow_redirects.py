"""A stand-in browser for ``$BROWSER``: ``python follow_redirects.py URL`` opens the URL and follows its redirects.

The loopback authorization server approves at once, so following its redirect delivers
the code to ``mrtr call``'s loopback listener, as a person's browser would.
"""

import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=10) as response:
    response.read()
