"""How the hub's own HTTP client connects to the proxy's API and to the servers it spawns.

JupyterHub makes its internal requests (adding a student's route to configurable-http-proxy when
their server starts, polling a starting server, asking a service) through one aiohttp session
that keeps idle connections for 15 s and hands out the *oldest* idle one first. The proxy's API
is a Node server that closes a connection idle for 5 s. A hub whose event loop is busy — a class
logging in at once — has not yet read the proxy's close when it takes that connection again, so
the request goes out on a dead socket and fails ("Can not write request body", "Server
disconnected"). JupyterHub retries the proxy's API for 30 s and then gives the spawn up: under the
100-student load test one student's server was started and then stopped because its route was
never added.

A connection per request removes the race whatever the loop's lag (``force_close``): on the
loopback or the deployment's own network a connection costs well under a millisecond, a few
hundred of them a minute at the busiest. Lowering aiohttp's keep-alive below Node's would only
narrow the window, since a lagging loop can hold an acquired connection past any margin.
"""

CONNECTOR_OPTIONS = {"force_close": True}  # for c.JupyterHubHTTPClient.connector_options
