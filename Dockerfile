# Attention Lab on a CPU: `docker build -t attention-lab . && docker run -p 8501:8501 attention-lab`,
# then open http://localhost:8501. Several replicas: docker-compose.yml and README, "Serving a large class".
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# torch from PyTorch's CPU wheel index first: the default torch wheel for Linux brings CUDA libraries of several
# GB that a CPU never uses. requirements.txt then finds torch==2.13.0 already installed (2.13.0+cpu).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
WORKDIR /app
COPY requirements.txt .
RUN pip install --index-url "$TORCH_INDEX" torch==2.13.0 \
 && pip install -r requirements.txt \
 && python -c "import torch; assert not torch.cuda.is_available() and torch.version.cuda is None, torch.__version__"

COPY .streamlit/ .streamlit/
COPY app.py ./
COPY core/ core/
COPY pages/ pages/
COPY assets/ assets/

# Saved runs (Live training) go to $ATTENTION_LAB_USER_DIR: a volume there keeps them, and one volume shared by
# every replica lets each list the others' runs (docker-compose.yml).
ENV ATTENTION_LAB_USER_DIR=/data/runs
RUN useradd --create-home --uid 10001 lab && chown -R lab /app \
 && mkdir -p /data/runs && chown lab /data/runs
USER lab

EXPOSE 8501
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
# The cookie secret comes from the environment (STREAMLIT_SERVER_COOKIE_SECRET), never from the image.
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501"]
