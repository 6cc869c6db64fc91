"""A FastAPI app that scans every chat request with Rampart before its handler runs.

    pip install ./python fastapi uvicorn
    uvicorn examples.python.fastapi_app:app

The middleware reads JSON bodies with `messages` (OpenAI or Anthropic shape) or `prompt`,
answers 400 with the decision's rules on BLOCK, and lets everything else through; the
handler gets the decision in `request.state.rampart`. One `Firewall` serves every request
(thread-safe; scans release the GIL and run on a worker thread).
"""

import json

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

import rampart

fw = rampart.Firewall()
app = FastAPI()


@app.middleware("http")
async def rampart_guard(request: Request, call_next):
    if request.method == "POST" and request.headers.get("content-type", "").startswith("application/json"):
        body = await request.body()
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        decision = None
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            decision = await fw.scan_async(messages=data["messages"], system=data.get("system"))
        elif isinstance(data, dict) and isinstance(data.get("prompt"), str):
            decision = await fw.scan_async(data["prompt"])
        if decision is not None and decision.blocked:
            return JSONResponse({"error": "blocked by Rampart", "rules": decision.rules}, status_code=400)
        request.state.rampart = decision
    return await call_next(request)


@app.post("/chat")
async def chat(request: Request):
    data = await request.json()
    decision = request.state.rampart
    # … call the model here …
    return {"answer": "(the model's answer)", "rampart": decision.action if decision else None,
            "messages": len(data.get("messages", []))}
