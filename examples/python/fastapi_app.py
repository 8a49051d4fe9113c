"""A FastAPI app with libratelimit's dependency on its routes.
Run: python -m uvicorn examples.python.fastapi_app:app"""
from fastapi import Depends, FastAPI

from libratelimit.fastapi import RateLimit

app = FastAPI()
search_limit = RateLimit("10/minute")
upload_limit = RateLimit("gcra:5/1s,burst=10", name="upload")


@app.get("/search", dependencies=[Depends(search_limit)])
async def search(q: str = ""):
    return {"q": q, "results": []}


@app.get("/items/{item_id}", dependencies=[Depends(RateLimit("3/minute"))])
async def item(item_id: int):
    return {"id": item_id}


@app.post("/upload", dependencies=[Depends(upload_limit)])
async def upload():
    return {"ok": True}
