"""The scrape loop a polling receiver runs on (`scraper.py`): a receiver supplies one
`async def scrape()`, the controller calls it on its interval with a timeout, counts it and
hands the batch on. A new polling receiver uses this rather than its own loop.
"""
